// SPDX-License-Identifier: BSL-1.0
// R8 -- a "key" that ignores the event (here: the time of the call) can be called without
// one, so every retry looks new. The twin's key reads the event's own identity.
#include <commit_order/commit_order.hpp>

#include <chrono>

#include "fixtures.hpp"

using namespace cf;

struct arrival_time_key {
  template <class... Ignored>
  std::int64_t operator()(const Ignored&...) const {
    return std::chrono::system_clock::now().time_since_epoch().count();
  }
};
struct order_id_key {
  std::int64_t operator()(const order_event& e) const { return e.order_id; }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using event_key = arrival_time_key;
#else
using event_key = order_id_key;
#endif
using sink_t = co::memory::table<order_event, event_key, co::capabilities<co::Idempotent>>;

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}
