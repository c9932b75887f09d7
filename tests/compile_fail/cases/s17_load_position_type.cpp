// SPDX-License-Identifier: BSL-1.0
// S17 -- load_position() returns a bare position: "nothing stored yet" would read as position
// 0, and the message names exactly that member, not five it has. The twin returns
// std::optional<position>.
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
  void store_position(co::position p) { stored = p; }
#ifdef COMMIT_ORDER_COMPILE_FAIL
  co::position load_position() const {
    return stored.value_or(co::position{0});
  }
#else
  std::optional<co::position> load_position() const {
    return stored;
  }
#endif
  std::optional<co::position> stored;
};

void consume(order_log& log, orders_flat_sink& sink) {
  co::pipeline<order_log, orders_flat_sink, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
