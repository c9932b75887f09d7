// SPDX-License-Identifier: BSL-1.0
// S30 -- a sink whose rows are durable at flush(), declared with a flush the pipeline cannot
// call as flush() (it takes a timeout): the loop would never flush, and the position would
// pass rows still in the send buffer. The twin declares flush() as the loop calls it.
#include <commit_order/commit_order.hpp>

#include <chrono>
#include <vector>

#include "fixtures.hpp"

using namespace cf;

struct buffered_stream {
  using row_type = order_event;
  using capabilities = co::capabilities<co::AppendOnly, co::Emits, co::Volatile>;
  void apply(co::offset, const order_event& e) { buffer.push_back(e); }
#ifdef COMMIT_ORDER_COMPILE_FAIL
  void flush(std::chrono::milliseconds) {
    buffer.clear();
  }
#else
  void flush() {
    buffer.clear();
  }
#endif
  std::vector<order_event> buffer;
};

void consume(order_log& log, buffered_stream& sink, volatile_store& store) {
  co::pipeline<order_log, buffered_stream, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
