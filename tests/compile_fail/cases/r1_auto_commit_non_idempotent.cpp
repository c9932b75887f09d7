// SPDX-License-Identifier: BSL-1.0
// R1 -- AutoCommit commits on a timer, whether or not the write finished: it replays up to
// one interval and also skips records. A plain append table would get duplicates and gaps.
// The twin keys the table on the event, which absorbs the replays.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = append_table;
#else
using sink_t = upsert_table;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtMostOnce<co::AutoCommit>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
