// SPDX-License-Identifier: BSL-1.0
// R7 -- an e-mail cannot be unsent: no step order makes a side-effecting sink idempotent.
// The twin writes the same events to an outbox table (keyed on the event), from which a
// sender with a claim check sends.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct email_sender {
  using row_type = order_event;
  using capabilities = co::capabilities<co::SideEffecting, co::Volatile>;
  void apply(co::offset, const order_event&) {}
};
using outbox_table = order_table<co::Idempotent>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = email_sender;
#else
using sink_t = outbox_table;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}
