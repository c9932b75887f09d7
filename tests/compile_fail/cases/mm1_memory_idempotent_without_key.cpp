// SPDX-License-Identifier: BSL-1.0
// MM1: an in-memory table that declares Idempotent and names no key to upsert on. The twin
// keys it on the order id.
#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using table_key = co::no_key;
#else
using table_key = order_key;
#endif
using table_t = co::memory::table<order_event, table_key, co::capabilities<co::Idempotent>>;

void consume(order_log& log, table_t& table, volatile_store& store) {
  co::pipeline<order_log, table_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, table,
                                                                                        store);
  p.run();
}
