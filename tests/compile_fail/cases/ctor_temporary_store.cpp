// SPDX-License-Identifier: BSL-1.0
// Constructor -- a temporary position store: the pipeline keeps a reference, and the position
// would be committed into an object that no longer exists. The twin passes a store that
// outlives the pipeline.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  (void)store;
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, volatile_store{});
#else
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
#endif
  p.run();
}
