// SPDX-License-Identifier: BSL-1.0
// S9 -- an error handling the library does not know: how failures are handled must be readable
// off the type. The twin retries three times, then stops.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct ignore_errors {};
using handling_t = ignore_errors;
#else
using handling_t = co::retry<3>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_error_handling<handling_t>>
      p(log, sink, store);
  p.run();
}
