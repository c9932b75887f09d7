// SPDX-License-Identifier: BSL-1.0
// R13 -- writes handed to a thread pool, into a table that is not safe to call from several
// threads. The twin wraps the table so it is, and declares Concurrent.
#include <commit_order/adapters/memory/synchronized.hpp>
#include <commit_order/commit_order.hpp>
#include <commit_order/thread_pool.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = guarded_table;
#else
using sink_t = co::memory::synchronized<guarded_table>;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store, co::thread_pool& pool) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_executor<co::thread_pool>>
      p(log, sink, store, pool);
  p.run();
}
