// SPDX-License-Identifier: BSL-1.0
// R8 -- a key that counts calls gives every retry a new key: the upsert never meets its
// earlier row, and replays become duplicates. The twin keys on the event's order_id.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct call_counter_key {
  mutable std::int64_t calls = 0;
  std::int64_t operator()(const order_event&) const { return calls++; }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using event_key = call_counter_key;
#else
using event_key = co::key<&order_event::order_id>;
#endif
using sink_t = co::memory::table<order_event, event_key, co::capabilities<co::Idempotent>>;

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}
