// SPDX-License-Identifier: BSL-1.0
// S8 -- an optional position is a value, not a store: it has no load() and no commit().
// The twin uses a position store.
#include <commit_order/commit_order.hpp>

#include <optional>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using store_t = std::optional<co::position>;
#else
using store_t = volatile_store;
#endif

void consume(order_log& log, upsert_table& sink, store_t& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<store_t>> p(log, sink,
                                                                                      store);
  p.run();
}
