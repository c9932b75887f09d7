// SPDX-License-Identifier: BSL-1.0
// R4 -- TransactionalPosition stores the position in the sink's transaction; a sink without
// multi-row transactions has nowhere to put it. The twin's table is Transactional.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = order_table<co::Idempotent, co::OffsetGuarded>;
#else
using sink_t = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional>;
#endif

void consume(order_log& log, sink_t& sink) {
  co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
