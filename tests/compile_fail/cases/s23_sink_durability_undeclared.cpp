// SPDX-License-Identifier: BSL-1.0
// S23 -- a sink that does not say what a write that returned survives: the durability rules
// (R9a-c) cannot be judged, and no level is assumed. The twin declares Synced (and a log and
// store as durable, R9).
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct orders_upsert {
  using row_type = order_event;
  using key_type = order_key;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  using capabilities = co::capabilities<co::Idempotent>;
#else
  using capabilities = co::capabilities<co::Idempotent, co::Synced>;
#endif
  void apply(co::offset, const order_event&) {}
};

void consume(synced_log& log, orders_upsert& sink, synced_store& store) {
  co::pipeline<synced_log, orders_upsert, co::AtLeastOnce<>, co::with_store<synced_store>> p(
      log, sink, store);
  p.run();
}
