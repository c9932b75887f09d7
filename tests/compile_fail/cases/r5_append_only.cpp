// SPDX-License-Identifier: BSL-1.0
// R5 -- its reason, an older replay overwriting newer data, is a property of a sink that
// replaces rows: a keyless transactional table that does not say it only appends is refused,
// and the twin, the same table declared AppendOnly (a transactional log), compiles.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = co::memory::table<order_event, co::no_key, co::capabilities<co::Transactional>>;
#else
using sink_t = transactional_log;
#endif

void consume(order_log& log, sink_t& sink) {
  co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink);
  static_assert(std::is_same_v<decltype(p)::guarantee, co::ExactlyOnceInSink>);
  p.run();
}
