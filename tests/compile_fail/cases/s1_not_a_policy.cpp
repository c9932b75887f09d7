// SPDX-License-Identifier: BSL-1.0
// S1 -- the commit trigger passed where the policy goes: EveryBatch says how often the
// position moves, not in which order. The twin names the policy, with that trigger.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using policy_t = co::EveryBatch;
#else
using policy_t = co::AtLeastOnce<co::EveryBatch>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, policy_t, co::with_store<volatile_store>> p(log, sink,
                                                                                    store);
  p.run();
}
