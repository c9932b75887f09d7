// SPDX-License-Identifier: BSL-1.0
// R19 -- a topic of several partitions, and a position store with room for one position:
// the partitions would overwrite each other's. The twin's store keeps one per partition.
#include <commit_order/commit_order.hpp>

#include <optional>

#include "fixtures.hpp"

using namespace cf;

using topic = co::memory::partitioned_log<order_event>;
using table_t = order_table<co::Idempotent, co::OffsetGuarded, co::PartitionScoped>;

struct one_position {
  using capabilities = co::capabilities<co::Volatile>;
  std::optional<co::position> stored;
  std::optional<co::position> load() const { return stored; }
  void commit(co::position p) { stored = p; }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using store_t = one_position;
#else
using store_t = volatile_store;
#endif

void consume(topic::consumer& source, table_t& sink, store_t& store) {
  co::pipeline<topic::consumer, table_t, co::AtLeastOnce<>, co::with_store<store_t>> p(source, sink,
                                                                                       store);
  p.run();
}
