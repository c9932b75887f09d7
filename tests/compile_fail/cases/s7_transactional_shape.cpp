// SPDX-License-Identifier: BSL-1.0
// S7 -- a sink that declares Transactional without the calls a transaction needs: the claim
// cannot be honoured. The twin implements begin/commit/rollback and the position calls.
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
#ifndef COMMIT_ORDER_COMPILE_FAIL
  void begin() {}
  void commit() {}
  void rollback() {}
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
