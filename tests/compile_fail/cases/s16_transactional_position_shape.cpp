// SPDX-License-Identifier: BSL-1.0
// S16 -- a sink with begin/commit/rollback that declares Transactional but cannot hold the
// position in its transaction. The twin adds store_position and load_position.
#include <commit_order/commit_order.hpp>

#include <optional>

#include "fixtures.hpp"

using namespace cf;

struct orders_flat_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Volatile>;
  void apply(co::offset, const order_event&) {}
  void begin() {}
  void commit() {}
  void rollback() {}
#ifndef COMMIT_ORDER_COMPILE_FAIL
  void store_position(co::position p) {
    stored = p;
  }
  std::optional<co::position> load_position() const {
    return stored;
  }
  std::optional<co::position> stored;
#endif
};

void consume(order_log& log, orders_flat_sink& sink) {
  co::pipeline<order_log, orders_flat_sink, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
