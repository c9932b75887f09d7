// SPDX-License-Identifier: BSL-1.0
// S26 -- a sink that declares PartitionScoped but whose apply is never told the partition: its
// partition column would stay empty and the guard compare offsets across partitions. The twin
// takes the partition.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using topic = co::memory::partitioned_log<order_event>;

struct shared_orders {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Volatile>;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  void apply(co::offset, const order_event&) {}
#else
  void apply(co::partition_id, co::offset, const order_event&) {}
#endif
};

void consume(topic::consumer& source, shared_orders& sink, volatile_store& store) {
  co::pipeline<topic::consumer, shared_orders, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      source, sink, store);
  p.run();
}
