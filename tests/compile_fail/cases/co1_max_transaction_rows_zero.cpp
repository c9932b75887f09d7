// SPDX-License-Identifier: BSL-1.0
// CO1: a sink that declares a transaction limit of no rows, which no unit could meet. The twin
// declares 64.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using limit = co::MaxTransactionRows<0>;
#else
using limit = co::MaxTransactionRows<64>;
#endif
using table_t = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional, limit>;

void consume(order_log& log, table_t& table) {
  co::pipeline<order_log, table_t, co::TransactionalPosition<>> p(log, table);
  p.run();
}
