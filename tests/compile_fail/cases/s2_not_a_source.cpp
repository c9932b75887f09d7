// SPDX-License-Identifier: BSL-1.0
// S2 -- a vector of events has no position to seek to or resume from: it is not a source.
// The twin reads the same events from a log.
#include <commit_order/commit_order.hpp>

#include <vector>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using source_t = std::vector<order_event>;
#else
using source_t = order_log;
#endif

void consume(source_t& events, upsert_table& sink, volatile_store& store) {
  co::pipeline<source_t, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      events, sink, store);
  p.run();
}
