// SPDX-License-Identifier: BSL-1.0
// S15 -- a sink that declares Idempotent but names no key: nothing could check that its
// "idempotency" is keyed on the event (rule R8 judges only a key that exists). The twin names
// the key its upsert conflicts on.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct orders_upsert {
  using row_type = order_event;
#ifndef COMMIT_ORDER_COMPILE_FAIL
  using key_type = order_key;
#endif
  using capabilities = co::capabilities<co::Idempotent, co::Volatile>;
  void apply(co::offset, const order_event&) {}
};

void consume(order_log& log, orders_upsert& sink, volatile_store& store) {
  co::pipeline<order_log, orders_upsert, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
