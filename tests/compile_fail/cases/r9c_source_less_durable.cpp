// SPDX-License-Identifier: BSL-1.0
// R9c -- a log that dies with the process cannot back a position stored in an fsync'ed
// table: after a power loss the log could forget records behind the position and hand their
// offsets to new records, which the position would then skip. The twin's log is Synced.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using synced_tx_table =
    order_table<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Synced>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using log_t = order_log;
#else
using log_t = synced_log;
#endif

void consume(log_t& log, synced_tx_table& sink) {
  co::pipeline<log_t, synced_tx_table, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
