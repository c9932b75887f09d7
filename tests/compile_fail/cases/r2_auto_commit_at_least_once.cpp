// SPDX-License-Identifier: BSL-1.0
// R2 -- AtLeastOnce promises no loss, but under AutoCommit the timer may commit a position
// before the write: the order that runs is at-most-once. The twin commits every batch.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using policy_t = co::AtLeastOnce<co::AutoCommit>;
#else
using policy_t = co::AtLeastOnce<co::EveryBatch>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, policy_t, co::with_store<volatile_store>> p(log, sink,
                                                                                    store);
  p.run();
}
