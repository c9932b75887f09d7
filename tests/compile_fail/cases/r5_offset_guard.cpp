// SPDX-License-Identifier: BSL-1.0
// R5 -- under TransactionalPosition a replayed older record must not overwrite a newer row:
// the upsert has to be guarded on the source offset. The twin's table is OffsetGuarded.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = order_table<co::Idempotent, co::Transactional>;
#else
using sink_t = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional>;
#endif

void consume(order_log& log, sink_t& sink) {
  co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
