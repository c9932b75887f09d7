// SPDX-License-Identifier: BSL-1.0
// option -- the same option twice: one of the two would be silently ignored. The twin names
// each option once.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using pipeline_t =
    co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
                 co::with_error_handling<co::stop>, co::with_error_handling<co::retry<2>>>;
#else
using pipeline_t =
    co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
                 co::with_error_handling<co::retry<2>>>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  pipeline_t p(log, sink, store);
  p.run();
}
