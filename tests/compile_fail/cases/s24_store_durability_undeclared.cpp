// SPDX-License-Identifier: BSL-1.0
// S24 -- a position store that does not say what a commit that returned survives. The twin
// declares Volatile, as the in-memory table it vouches for.
#include <commit_order/commit_order.hpp>

#include <optional>

#include "fixtures.hpp"

using namespace cf;

struct position_cell {
#ifndef COMMIT_ORDER_COMPILE_FAIL
  using capabilities = co::capabilities<co::Volatile>;
#endif
  std::optional<co::position> stored;
  std::optional<co::position> load() const {
    return stored;
  }
  void commit(co::position p) {
    stored = p;
  }
};

void consume(order_log& log, upsert_table& sink, position_cell& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<position_cell>> p(
      log, sink, store);
  p.run();
}
