// SPDX-License-Identifier: BSL-1.0
// S13 -- a capability given where the policy takes its commit trigger: AtLeastOnce<Idempotent>
// reads like "at least once, idempotently", but idempotency is the sink's to declare. The
// message names the argument as the mistake. The twin uses the default trigger.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using policy_t = co::AtLeastOnce<co::Idempotent>;
#else
using policy_t = co::AtLeastOnce<>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, policy_t, co::with_store<volatile_store>> p(log, sink,
                                                                                    store);
  p.run();
}
