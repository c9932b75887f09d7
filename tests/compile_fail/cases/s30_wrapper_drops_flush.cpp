// SPDX-License-Identifier: BSL-1.0
// S30 -- a user's wrapper of a sink whose rows are durable at flush() (declared Flushed) that
// restates the wrapped sink's capabilities and forwards apply() but not flush(): the loop would
// never flush, and the position would pass rows still in the send buffer. The twin forwards it.
#include <commit_order/commit_order.hpp>

#include <cstddef>
#include <vector>

#include "fixtures.hpp"

using namespace cf;

struct buffered_stream {
  using row_type = order_event;
  using capabilities = co::capabilities<co::AppendOnly, co::Emits, co::Flushed, co::Volatile>;
  void apply(co::offset, const order_event& e) { buffer.push_back(e); }
  void flush() { buffer.clear(); }
  std::vector<order_event> buffer;
};

/// Counts the rows it passes on.
struct counted_stream {
  using row_type = order_event;
  using capabilities = co::capabilities_of_t<buffered_stream>;
  void apply(co::offset o, const order_event& e) {
    ++rows;
    inner->apply(o, e);
  }
#ifndef COMMIT_ORDER_COMPILE_FAIL
  void flush() {
    inner->flush();
  }
#endif
  buffered_stream* inner;
  std::size_t rows = 0;
};

void consume(order_log& log, counted_stream& sink, volatile_store& store) {
  co::pipeline<order_log, counted_stream, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
