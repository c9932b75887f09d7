// SPDX-License-Identifier: BSL-1.0
// S6 -- a hand-written sink that does not say what it is: the rules cannot judge it, and
// assuming anything would be a guess. The twin declares its capabilities.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct tombstone_sink {
  using row_type = order_event;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  // declares nothing
#else
  using capabilities = co::capabilities<co::DuplicatesHarmless, co::Volatile>;
#endif
  void apply(co::offset, const order_event&) {}
};

void consume(order_log& log, tombstone_sink& sink, volatile_store& store) {
  co::pipeline<order_log, tombstone_sink, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
