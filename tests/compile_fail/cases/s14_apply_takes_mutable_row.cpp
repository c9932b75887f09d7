// SPDX-License-Identifier: BSL-1.0
// S14 -- a sink whose apply takes the row by non-const reference has a row_type and an apply,
// but the pipeline cannot call it; the message says so instead of claiming both are missing.
// The twin takes the row by const reference.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct tombstones {
  using row_type = order_event;
  using capabilities = co::capabilities<co::DuplicatesHarmless, co::Volatile>;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  void apply(co::offset, order_event&) {}
#else
  void apply(co::offset, const order_event&) {}
#endif
};

void consume(order_log& log, tombstones& sink, volatile_store& store) {
  co::pipeline<order_log, tombstones, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
