// SPDX-License-Identifier: BSL-1.0
// Constructor -- a temporary sink: the pipeline keeps a reference, which would dangle after
// this statement. The twin passes a sink that outlives the pipeline.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  (void)sink;
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, upsert_table{}, store);
#else
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
#endif
  p.run();
}
