// SPDX-License-Identifier: BSL-1.0
// S5 -- a table of invoices fed from a log of orders: the rows cannot be built from the
// events. The twin's table takes order events.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct invoice_row {
  std::int64_t invoice_id = 0;
};
using invoice_table = co::memory::table<invoice_row, co::key<&invoice_row::invoice_id>,
                                        co::capabilities<co::Idempotent>>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = invoice_table;
#else
using sink_t = upsert_table;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}
