// SPDX-License-Identifier: BSL-1.0
// S20 -- a clock without now(): AutoCommit's timer cannot tell time. The message names the
// shape a clock needs instead of the library's internals. The twin's clock has now().
#include <commit_order/commit_order.hpp>

#include <chrono>

#include "fixtures.hpp"

using namespace cf;

struct virtual_clock {
  using duration = std::chrono::milliseconds;
  using time_point = std::chrono::time_point<virtual_clock>;
#ifndef COMMIT_ORDER_COMPILE_FAIL
  static time_point now() noexcept {
    return time_point{};
  }
#endif
};

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtMostOnce<co::AutoCommit>,
               co::with_store<volatile_store>, co::with_clock<virtual_clock>>
      p(log, sink, store);
  p.run();
}
