// SPDX-License-Identifier: BSL-1.0
// R0 -- a user-defined policy whose step list has no Write: there is no order to derive a
// guarantee from. The twin is the same policy with its Write step.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct PollThenCommit final {
  using trigger = co::EveryBatch;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  using steps = co::step_list<co::Poll, co::CommitPosition>;
#else
  using steps = co::step_list<co::Poll, co::Write, co::CommitPosition>;
#endif
};

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, PollThenCommit, co::with_store<volatile_store>> p(log, sink,
                                                                                          store);
  p.run();
}
