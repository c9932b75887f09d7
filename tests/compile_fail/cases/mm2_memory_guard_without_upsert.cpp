// SPDX-License-Identifier: BSL-1.0
// MM2: an in-memory table that declares OffsetGuarded, a condition on a keyed upsert, without
// Idempotent. The twin declares both.
#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using table_t = order_table<co::OffsetGuarded>;
#else
using table_t = order_table<co::Idempotent, co::OffsetGuarded>;
#endif

void consume(order_log& log, table_t& table, volatile_store& store) {
  co::pipeline<order_log, table_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, table,
                                                                                        store);
  p.run();
}
