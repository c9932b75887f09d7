// SPDX-License-Identifier: BSL-1.0
// R16 -- retry_world<3> into a plain append table, outside any transaction: a write the world
// failed (a timeout, say) may have landed before it reported failure, and trying it again
// writes it twice. The twin tries again into a keyed upsert, which absorbs the second write.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = append_table;
#else
using sink_t = upsert_table;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtMostOnce<>, co::with_store<volatile_store>,
               co::with_error_handling<co::retry_world<3>>>
      p(log, sink, store);
  p.run();
}
