// SPDX-License-Identifier: BSL-1.0
// R15 -- writes completing out of order into a keyed upsert without the offset guard: an older
// event landing after a newer one would overwrite it. The twin's upsert is guarded.
#include <commit_order/adapters/memory/synchronized.hpp>
#include <commit_order/commit_order.hpp>
#include <commit_order/thread_pool.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = co::memory::synchronized<upsert_table>;
#else
using sink_t = co::memory::synchronized<order_table<co::Idempotent, co::OffsetGuarded>>;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store, co::thread_pool& pool) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_executor<co::thread_pool>>
      p(log, sink, store, pool);
  p.run();
}
