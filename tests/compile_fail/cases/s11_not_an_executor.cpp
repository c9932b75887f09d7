// SPDX-License-Identifier: BSL-1.0
// S11 -- something that cannot run tasks named as the executor. The twin names a thread pool.
#include <commit_order/adapters/memory/synchronized.hpp>
#include <commit_order/commit_order.hpp>
#include <commit_order/thread_pool.hpp>

#include "fixtures.hpp"

using namespace cf;

using sink_t = co::memory::synchronized<order_table<co::Idempotent, co::OffsetGuarded>>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct not_a_pool {
  int threads = 4;
};
using executor_t = not_a_pool;
#else
using executor_t = co::thread_pool;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store, executor_t& pool) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_executor<executor_t>>
      p(log, sink, store, pool);
  p.run();
}
