// SPDX-License-Identifier: BSL-1.0
// R10 -- AtLeastOnce commits its position to a position store, and none was given: the
// position would never be recorded. The twin passes one.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

void consume(order_log& log, upsert_table& sink, [[maybe_unused]] volatile_store& store) {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>> p(log, sink);
#else
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
#endif
  p.run();
}
