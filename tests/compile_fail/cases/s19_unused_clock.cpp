// SPDX-License-Identifier: BSL-1.0
// S19 -- a clock given to a policy without AutoCommit: no timer reads it, so a test that
// meant to drive a timer in virtual time drives nothing. The twin uses AtMostOnce<AutoCommit>.
#include <commit_order/commit_order.hpp>

#include <chrono>

#include "fixtures.hpp"

using namespace cf;

struct virtual_clock {
  using duration = std::chrono::milliseconds;
  using time_point = std::chrono::time_point<virtual_clock>;
  static time_point now() noexcept { return time_point{}; }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using policy_t = co::AtMostOnce<>;
#else
using policy_t = co::AtMostOnce<co::AutoCommit>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, policy_t, co::with_store<volatile_store>,
               co::with_clock<virtual_clock>>
      p(log, sink, store);
  p.run();
}
