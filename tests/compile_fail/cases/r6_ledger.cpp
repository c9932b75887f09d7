// SPDX-License-Identifier: BSL-1.0
// R6 -- AtMostOnce may lose a unit, silently; a Ledger must never be short. The twin writes
// first and commits after (AtLeastOnce), which the ledger's keyed upsert absorbs.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using ledger_table = order_table<co::Idempotent, co::Ledger>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using policy_t = co::AtMostOnce<>;
#else
using policy_t = co::AtLeastOnce<>;
#endif

void consume(order_log& log, ledger_table& sink, volatile_store& store) {
  co::pipeline<order_log, ledger_table, policy_t, co::with_store<volatile_store>> p(log, sink,
                                                                                    store);
  p.run();
}
