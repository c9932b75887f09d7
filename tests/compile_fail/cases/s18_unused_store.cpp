// SPDX-License-Identifier: BSL-1.0
// S18 -- a position store given to TransactionalPosition, which keeps its position in the
// sink's transaction: the store would silently never move. The twin gives none.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using pipeline_t = co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>,
                                co::with_store<volatile_store>>;
#else
using pipeline_t = co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>>;
#endif

void consume(order_log& log, guarded_tx_table& sink, volatile_store& store) {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  pipeline_t p(log, sink, store);
#else
  (void)store;
  pipeline_t p(log, sink);
#endif
  p.run();
}
