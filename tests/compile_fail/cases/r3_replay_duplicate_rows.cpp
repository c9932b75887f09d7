// SPDX-License-Identifier: BSL-1.0
// R3 -- AtLeastOnce replays the last unit after a crash; a plain append table stores every
// replayed record as a second row (the ordered duplicate). The twin upserts on the event key.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = append_table;
#else
using sink_t = upsert_table;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}
