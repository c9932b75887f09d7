// SPDX-License-Identifier: BSL-1.0
// CO2: error handling that says retry and never would (retry<0>). The twin retries three times.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using handling = co::retry<0>;
#else
using handling = co::retry<3>;
#endif

void consume(order_log& log, guarded_tx_table& table) {
  co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>,
               co::with_error_handling<handling>>
      p(log, table);
  p.run();
}
