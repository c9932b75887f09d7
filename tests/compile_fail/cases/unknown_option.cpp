// SPDX-License-Identifier: BSL-1.0
// An unknown option is never ignored: here the store is passed bare instead of as
// with_store<Store>, which would otherwise leave the pipeline without a store. The twin
// wraps it.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using store_option = volatile_store;
#else
using store_option = co::with_store<volatile_store>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, store_option> p(log, sink, store);
  p.run();
}
