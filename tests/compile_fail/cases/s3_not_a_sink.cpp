// SPDX-License-Identifier: BSL-1.0
// S3 -- a vector is not a sink: it has no row_type and no apply(offset, row). The twin
// writes to a table.
#include <commit_order/commit_order.hpp>

#include <vector>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = std::vector<order_event>;
#else
using sink_t = upsert_table;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}
