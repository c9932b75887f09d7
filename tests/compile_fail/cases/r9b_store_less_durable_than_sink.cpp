// SPDX-License-Identifier: BSL-1.0
// R9b -- AtMostOnce makes the position durable before the write: a position kept in memory in
// front of an fsync'ed table would, after a power loss, replay into rows the table kept (an
// at-most-once order that duplicates). The twin's store is as durable as the table.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using synced_table = order_table<co::Idempotent, co::Synced>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using store_t = volatile_store;
#else
using store_t = synced_store;
#endif

void consume(synced_log& log, synced_table& sink, store_t& store) {
  co::pipeline<synced_log, synced_table, co::AtMostOnce<>, co::with_store<store_t>> p(log, sink,
                                                                                      store);
  p.run();
}
