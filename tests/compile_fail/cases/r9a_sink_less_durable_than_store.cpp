// SPDX-License-Identifier: BSL-1.0
// R9a -- AtLeastOnce makes the write durable before the position: a table kept in memory
// behind an fsync'ed position store would, after a power loss, leave a position past rows that
// vanished. The twin's table is as durable as the store.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using table_t = order_table<co::Idempotent, co::Volatile>;
#else
using table_t = order_table<co::Idempotent, co::Synced>;
#endif

void consume(synced_log& log, table_t& sink, synced_store& store) {
  co::pipeline<synced_log, table_t, co::AtLeastOnce<>, co::with_store<synced_store>> p(log, sink,
                                                                                       store);
  p.run();
}
