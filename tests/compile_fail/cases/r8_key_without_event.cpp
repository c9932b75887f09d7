// SPDX-License-Identifier: BSL-1.0
// R8 -- a key that does not take the event (here: a fresh identifier per call) gives every
// retry a new key, so replays become new rows. The twin's key reads the event's identity.
#include <commit_order/commit_order.hpp>

#include <atomic>

#include "fixtures.hpp"

using namespace cf;

inline std::atomic<std::int64_t> next_id{0};
struct fresh_id_key {
  std::int64_t operator()() const { return next_id++; }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using event_key = fresh_id_key;
#else
using event_key = co::key<&order_event::order_id>;
#endif
using sink_t = co::memory::table<order_event, event_key, co::capabilities<co::Idempotent>>;

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}
