// SPDX-License-Identifier: BSL-1.0
// R21 -- dead letters written in a sink's own transaction are durable only with the commit
// that passes their records' position. Under AtLeastOnce the position goes to a store after
// the write, and would pass a record whose letter no transaction ever carried. The twin stores
// the position in the sink's transaction (TransactionalPosition), with no store.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using sink_t = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional>;

// Letters the table writes in its own transaction, as kafka::transactional_sink's do.
struct table_letters {
  using sink_type = sink_t;
  using capabilities = co::capabilities<co::CommitsWithSink, co::Volatile>;
  void put(co::offset, const order_event&, const char*) {}
  [[nodiscard]] const sink_t& sink() const noexcept { return *table; }
  sink_t* table = nullptr;
};

void consume(order_log& log, sink_t& sink, store& positions, table_letters& letters) {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<table_letters>>
      p(log, sink, positions, letters);
#else
  (void)positions;
  co::pipeline<order_log, sink_t, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<table_letters>>
      p(log, sink, letters);
#endif
  p.run();
}
