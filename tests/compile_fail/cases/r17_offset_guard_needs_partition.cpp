// SPDX-License-Identifier: BSL-1.0
// R17 -- a topic of two partitions into a table guarded on source offsets alone: offset 9 of
// one partition says nothing about offset 3 of another, so an older record could win. The
// twin's rows carry their partition (PartitionScoped), and the guard compares within one.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using topic = co::memory::partitioned_log<order_event>;
#ifdef COMMIT_ORDER_COMPILE_FAIL
using table_t = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional>;
#else
using table_t =
    order_table<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>;
#endif

void consume(topic::consumer& source, table_t& sink) {
  co::pipeline<topic::consumer, table_t, co::TransactionalPosition<>> p(source, sink);
  p.run();
}
