// SPDX-License-Identifier: BSL-1.0
// A single-partition source whose records name the stream's partition (a Kafka partition_source
// reading topic partition 1) into a partitioned sink written as docs/reference.md writes one
// (`shared_orders_table`: only the partitioned forms, apply(k, o, row), load_position(k),
// applied_watermark(k)). The pipeline is partition 0: its positions and its rows go to partition
// 0 of the sink, whatever partition the records name, so the applied watermark is asked of the
// partition that holds them. (Handed the record's own partition, 1, the rows once escaped the
// recovery check and progress().) The same run with records naming partition 0 is the control:
// what it reports is what the docs promise for a single-partition source.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include "support/named_partition_log.hpp"
#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {

using scoped_table =
    order_table<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>;

/// A partitioned sink with only the partitioned forms, over the kit's table.
class partitioned_only_sink {
 public:
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = scoped_table::capabilities;
  explicit partitioned_only_sink(scoped_table& t) : t_(&t) {}
  co::write_outcome apply(co::partition_id k, co::offset o, const order_event& row) {
    return t_->apply(k, o, row);
  }
  void begin() { t_->begin(); }
  void commit() { t_->commit(); }
  void rollback() { t_->rollback(); }
  void store_position(co::partition_id k, co::position p) { t_->store_position(k, p); }
  std::optional<co::position> load_position(co::partition_id k) const {
    return t_->load_position(k);
  }
  std::optional<co::offset> applied_watermark(co::partition_id k) const {
    return t_->applied_watermark(k);
  }

 private:
  scoped_table* t_;
};
static_assert(co::partitioned_sink<partitioned_only_sink> &&
              co::partitioned_watermarked_sink<partitioned_only_sink>);

using tx_pipeline =
    co::pipeline<named_partition_log, partitioned_only_sink, co::TransactionalPosition<>>;
using amo_pipeline = co::pipeline<named_partition_log, partitioned_only_sink, co::AtMostOnce<>,
                                  co::with_store<store>>;

}  // namespace

TEST_CASE("a partitioned sink fed by a source naming partition 1: rows above the position") {
  // recover() must refuse rows newer than the stored position (invariant_violation), as it does
  // when the records name partition 0.
  for (const int named : {0, 1}) {
    CAPTURE(named);
    order_log log = make_log(10, 10);
    scoped_table table;
    partitioned_only_sink sink(table);
    {
      named_partition_log src(log, co::partition_id{named});
      tx_pipeline p(src, sink, co::settings{.batch_size = 4});
      p.poll_once();
      REQUIRE(p.committed_position() == co::position{4});
    }
    // A bug elsewhere wrote this stream's row of offset 7 without moving the position: under
    // partition 0, where the pipeline writes its rows.
    table.apply(co::partition_id{0}, co::offset{7}, order_event{77, 1, 7});
    CHECK(table.applied_watermark(co::partition_id{1}) == std::nullopt);  // nothing goes to 1
    order_log again = make_log(10, 10);
    named_partition_log src(again, co::partition_id{named});
    tx_pipeline restarted(src, sink, co::settings{.batch_size = 4});
    CHECK_THROWS_AS(restarted.recover(), co::invariant_violation);
  }
}

TEST_CASE("a partitioned sink fed by a source naming partition 1: progress() of applied rows") {
  // Four records read, committed and applied: nothing is unapplied, whatever partition the
  // records name, and progress() and progress(k) for the named partition agree.
  for (const int named : {0, 1}) {
    CAPTURE(named);
    order_log log = make_log(10, 10);
    scoped_table table;
    partitioned_only_sink sink(table);
    store st;
    named_partition_log src(log, co::partition_id{named});
    amo_pipeline p(src, sink, st, co::settings{.batch_size = 4});
    p.poll_once();
    REQUIRE(table.size() == 4);
    const co::progress g = p.progress();
    CHECK(g.applied_watermark == co::offset{3});
    CHECK(g.unapplied() == 0);
    CHECK(p.progress(co::partition_id{named}).applied_watermark == g.applied_watermark);
  }
}
