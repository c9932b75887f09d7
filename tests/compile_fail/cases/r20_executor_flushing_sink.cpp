// SPDX-License-Identifier: BSL-1.0
// R20 -- a sink whose rows are durable only at flush() (a producer waiting for its
// acknowledgements), handed to a thread pool: the tracker would commit the positions of rows
// apply() returned from, still in the send buffer. The twin writes on the pipeline's thread,
// which flushes at the end of each unit before the position moves.
#include <commit_order/commit_order.hpp>
#include <commit_order/thread_pool.hpp>

#include <mutex>
#include <vector>

#include "fixtures.hpp"

using namespace cf;

/// An emitted stream that buffers what apply() hands it until flush().
struct buffered_stream {
  using row_type = order_event;
  using capabilities = co::capabilities<co::AppendOnly, co::Emits, co::Concurrent, co::Volatile>;
  void apply(co::offset, const order_event& e) {
    const std::lock_guard lock(m);
    buffer.push_back(e);
  }
  void flush() {
    const std::lock_guard lock(m);
    sent.insert(sent.end(), buffer.begin(), buffer.end());
    buffer.clear();
  }
  std::mutex m;
  std::vector<order_event> buffer;
  std::vector<order_event> sent;
};

void consume(order_log& log, buffered_stream& sink, volatile_store& store, co::thread_pool& pool) {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  co::pipeline<order_log, buffered_stream, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_executor<co::thread_pool>>
      p(log, sink, store, pool);
#else
  (void)pool;
  co::pipeline<order_log, buffered_stream, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
#endif
  p.run();
}
