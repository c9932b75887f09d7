// SPDX-License-Identifier: BSL-1.0
// Constructor -- an object of another type where the option's part belongs (a Synced store
// for a pipeline whose option names the Volatile one). The twin passes the named type.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using given_t = synced_store;
#else
using given_t = volatile_store;
#endif

void consume(order_log& log, upsert_table& sink, given_t& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
