// SPDX-License-Identifier: BSL-1.0
// Harness check: two illegal pipelines give two errors, each with the expected message. The
// driver must still fail (registered WILL_FAIL): a misuse is promised exactly one error.
#include <commit_order/commit_order.hpp>

#include "../cases/fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = append_table;
using other_sink_t = co::memory::table<order_event, co::no_key, co::capabilities<co::Synced>>;
#else
using sink_t = upsert_table;
using other_sink_t = order_table<co::Idempotent, co::Synced>;
#endif

void consume(order_log& log, sink_t& sink, volatile_store& store) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>> p(log, sink,
                                                                                       store);
  p.run();
}

void consume_again(synced_log& log, other_sink_t& sink, synced_store& store) {
  co::pipeline<synced_log, other_sink_t, co::AtLeastOnce<>, co::with_store<synced_store>> p(
      log, sink, store);
  p.run();
}
