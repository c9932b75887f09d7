// SPDX-License-Identifier: BSL-1.0
// Constructor -- the option names a position store, but the constructor is not given one:
// the message says which part is missing. The twin passes it.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  (void)store;
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log,
                                                                                             sink);
#else
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
#endif
  p.run();
}
