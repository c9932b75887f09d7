// SPDX-License-Identifier: BSL-1.0
// MM3: an in-memory table declared AppendOnly (a log) and Idempotent (an upsert on a key): it
// cannot both keep every row and replace rows. The twin keeps AppendOnly and drops the upsert.
#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using table_t = order_table<co::AppendOnly, co::Idempotent, co::Transactional>;
#else
using table_t =
    co::memory::table<order_event, co::no_key, co::capabilities<co::AppendOnly, co::Transactional>>;
#endif

void consume(order_log& log, table_t& table) {
  co::pipeline<order_log, table_t, co::TransactionalPosition<>> p(log, table);
  p.run();
}
