// SPDX-License-Identifier: BSL-1.0
// R2 -- TransactionalPosition promises exactly-once in the sink's state, but a timer that
// commits the position outside the transaction makes it at-most-once. The twin stores the
// position inside the transaction, every batch.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using policy_t = co::TransactionalPosition<co::AutoCommit>;
#else
using policy_t = co::TransactionalPosition<co::EveryBatch>;
#endif

void consume(order_log& log, guarded_tx_table& sink) {
  co::pipeline<order_log, guarded_tx_table, policy_t> p(log, sink);
  p.run();
}
