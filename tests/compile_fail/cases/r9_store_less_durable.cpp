// R9 -- the position vouches for what the sink holds: a position kept in memory forgets
// what an fsync'ed table kept. The twin's store is as durable as the table.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using synced_table = order_table<co::Idempotent, co::Synced>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using store_t = volatile_store;
#else
using store_t = synced_store;
#endif

void consume(order_log& log, synced_table& sink, store_t& store) {
  co::pipeline<order_log, synced_table, co::AtLeastOnce<>, co::with_store<store_t>> p(log, sink,
                                                                                      store);
  p.run();
}
