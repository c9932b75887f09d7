// SPDX-License-Identifier: BSL-1.0
// S29 -- a sink of the user's own that declares AppendOnly beside Idempotent: an unguarded
// upsert that says it only appends would switch off R5 (and a log that says it upserts, R3).
// The twin declares what the sink does, a guarded transactional upsert.
#include <commit_order/commit_order.hpp>

#include <optional>

#include "fixtures.hpp"

using namespace cf;

struct orders_upsert {
  using row_type = order_event;
  using key_type = order_key;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  using capabilities =
      co::capabilities<co::AppendOnly, co::Idempotent, co::Transactional, co::Volatile>;
#else
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Volatile>;
#endif
  void apply(co::offset, const order_event&) {}
  void begin() {}
  void commit() {}
  void rollback() noexcept {}
  void store_position(co::position) {}
  [[nodiscard]] std::optional<co::position> load_position() const {
    return std::nullopt;
  }
};

void consume(order_log& log, orders_upsert& sink) {
  co::pipeline<order_log, orders_upsert, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
