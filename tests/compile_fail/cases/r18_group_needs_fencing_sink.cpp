// SPDX-License-Identifier: BSL-1.0
// R18 -- a consumer group moves partitions between members; a sink that keeps positions per
// partition but cannot fence would let a zombie's transaction commit after the new owner's.
// The twin's table claims partitions at the group's epoch and fences stale owners.
#include <commit_order/commit_order.hpp>

#include <optional>

#include "fixtures.hpp"

using namespace cf;

using group_t = co::memory::group<order_event>;

struct unfenced_orders {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped,
                                        co::Transactional, co::Volatile>;
  void apply(co::partition_id, co::offset, const order_event&) {}
  void begin() {}
  void commit() {}
  void rollback() {}
  void store_position(co::partition_id, co::position) {}
  std::optional<co::position> load_position(co::partition_id) const { return std::nullopt; }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using table_t = unfenced_orders;
#else
using table_t =
    order_table<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>;
#endif

void consume(group_t::member_consumer& source, table_t& sink) {
  co::pipeline<group_t::member_consumer, table_t, co::TransactionalPosition<>> p(source, sink);
  p.run();
}
