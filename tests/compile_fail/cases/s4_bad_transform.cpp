// SPDX-License-Identifier: BSL-1.0
// S4 -- a transform that carries state (here a running counter it would stamp into rows) is a
// mapping whose output depends on more than the event. The twin maps the event alone.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct stamp_with_counter {
  std::int64_t next = 0;
  order_event operator()(const order_event& e) const { return {e.order_id, next, e.total_cents}; }
};
using transform_t = stamp_with_counter;
#else
struct keep_totals_only {
  order_event operator()(const order_event& e) const { return {e.order_id, 0, e.total_cents}; }
};
using transform_t = keep_totals_only;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_transform<transform_t>>
      p(log, sink, store);
  p.run();
}
