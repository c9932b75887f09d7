// SPDX-License-Identifier: BSL-1.0
// Writes handed to an executor complete out of order; the committed position is the lowest
// offset not yet completed, so a thread pool never turns the pipeline into at-most-once.
// The testing kit's manual executor makes every completion order reproducible.
#include <doctest/doctest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <commit_order/adapters/memory/manual_executor.hpp>
#include <commit_order/adapters/memory/synchronized.hpp>

#include "support/flaky.hpp"
#include "support/named_partition_log.hpp"
#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
using concurrent_table = co::memory::synchronized<guarded_table>;
using executor = co::memory::manual_executor;
using alo = co::pipeline<order_log, concurrent_table, co::AtLeastOnce<>, co::with_store<store>,
                         co::with_executor<executor>>;
}  // namespace

// ---- the rules for handing writes to an executor ---------------------------------------------
static_assert(co::can_make_pipeline<order_log, concurrent_table, co::AtLeastOnce<>,
                                    co::with_store<store>, co::with_executor<executor>>);
static_assert(std::is_same_v<co::verdict_t<order_log, guarded_table, co::AtLeastOnce<>,
                                           co::with_store<store>, co::with_executor<executor>>,
                             co::rules::executor_needs_concurrent_sink>);
// A sink that could take concurrent calls and has transactions: still, one transaction cannot
// span writes made on several threads.
struct concurrent_tx_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional,
                                        co::Concurrent, co::Volatile>;
  void apply(co::offset, const order_event&) {}
  void begin() {}
  void commit() {}
  void rollback() {}
  void store_position(co::position) {}
  std::optional<co::position> load_position() const { return std::nullopt; }
};
static_assert(
    std::is_same_v<co::verdict_t<order_log, concurrent_tx_sink, co::TransactionalPosition<>,
                                 co::with_executor<executor>>,
                   co::rules::executor_splits_transaction>);
static_assert(std::is_same_v<
              co::verdict_t<order_log, co::memory::synchronized<upsert_table>, co::AtLeastOnce<>,
                            co::with_store<store>, co::with_executor<executor>>,
              co::rules::out_of_order_needs_offset_guard>);
// A Transactional sink's retried write is safe because the unit it is in was rolled back; handed
// to an executor, the write runs outside any transaction, and a retry after a write that landed
// keeps both (R16), as for any sink without transactions.
struct concurrent_tx_append_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::Transactional, co::Concurrent, co::Volatile>;
  void apply(co::offset, const order_event&) {}
  void begin() {}
  void commit() {}
  void rollback() {}
  void store_position(co::position) {}
  std::optional<co::position> load_position() const { return std::nullopt; }
};
static_assert(std::is_same_v<co::verdict_t<order_log, concurrent_tx_append_sink, co::AtMostOnce<>,
                                           co::with_store<store>, co::with_executor<executor>,
                                           co::with_error_handling<co::retry<1>>>,
                             co::rules::retry_needs_idempotent_sink>);
static_assert(co::can_make_pipeline<order_log, concurrent_tx_append_sink, co::AtMostOnce<>,
                                    co::with_store<store>, co::with_error_handling<co::retry<1>>>);
static_assert(co::can_make_pipeline<order_log, concurrent_tx_append_sink, co::AtMostOnce<>,
                                    co::with_store<store>, co::with_executor<executor>>);

TEST_CASE("out-of-order completion: the position stops at the lowest incomplete record") {
  order_log log = make_log(15, 15);
  concurrent_table table;
  store st;
  executor ex;
  alo p(log, table, st, ex, co::settings{.batch_size = 5});

  CHECK(p.poll_once() == 5);  // offsets 0..4 handed out
  CHECK(ex.pending() == 5);
  ex.run(4);                  // offset 4 finishes first
  ex.run(2);                  // then offset 2
  CHECK(p.poll_once() == 5);  // 5..9 handed out; the commit step finds 0 still running
  CHECK_FALSE(st.load().has_value());
  ex.run(0);  // offsets 0 and 1 finish
  ex.run(0);
  CHECK(p.poll_once() == 5);  // 10..14; 0, 1, 2 are done, 3 is not
  CHECK(st.load() == co::position{3});
  // The highest completed offset is 4: committing past it would skip 3 and 5..14.
  CHECK(p.committed_position() == co::position{3});

  CHECK(p.poll_once() == 0);  // the source is drained: the rest is waited for, then committed
  CHECK(ex.pending() == 0);
  CHECK(st.load() == co::position{15});
  CHECK(table.inner().size() == 15);
}

TEST_CASE("a crash with writes in flight replays exactly the incomplete ones") {
  order_log log = make_log(12, 12);
  concurrent_table table;
  store st;
  executor ex;
  {
    alo p(log, table, st, ex, co::settings{.batch_size = 4});
    p.poll_once();          // 0..3
    ex.run_all_reversed();  // all four finish, newest first
    p.poll_once();          // 4..7 handed out; commit covers 0..3
    CHECK(st.load() == co::position{4});
    ex.run(1);     // offset 5 finishes
    ex.run(2);     // offset 7 finishes
    ex.discard();  // the process dies: offsets 4 and 6 never get written
  }
  CHECK(table.inner().size() == 6);
  executor ex2;
  co::pipeline<order_log, concurrent_table, co::AtLeastOnce<>, co::with_store<store>,
               co::with_executor<executor>, co::with_observer<co::counting_observer>>
      restarted(log, table, st, ex2, co::settings{.batch_size = 4});
  CHECK(restarted.recover() == co::position{4});
  CHECK(restarted.run() == 8);
  CHECK(table.inner().size() == 12);  // nothing lost
  CHECK(st.load() == co::position{12});
}

TEST_CASE("AtMostOnce with an executor is what it says: in-flight writes can be lost") {
  order_log log = make_log(8, 8);
  using table_t = co::memory::synchronized<append_table>;
  table_t table;
  store st;
  executor ex;
  {
    co::pipeline<order_log, table_t, co::AtMostOnce<>, co::with_store<store>,
                 co::with_executor<executor>>
        p(log, table, st, ex, co::settings{.batch_size = 8});
    p.poll_once();
    CHECK(st.load() == co::position{8});  // committed before any write ran
    ex.run(0);
    ex.discard();  // crash
  }
  CHECK(table.inner().size() == 1);  // seven records lost, as the type declared (MayLose)
  static_assert(std::is_same_v<co::guarantee_t<co::AtMostOnce<>>, co::MayLose>);
}

TEST_CASE("a failed write stops the pipeline; the position stays below it") {
  order_log log = make_log(10, 10);
  guarded_table inner;
  using sink_t = co::memory::synchronized<flaky_sink<guarded_table>>;
  sink_t sink(inner, std::map<co::offset, int>{{co::offset{6}, -1}});
  store st;
  executor ex;
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<store>,
               co::with_executor<executor>>
      p(log, sink, st, ex, co::settings{.batch_size = 10});
  CHECK(p.poll_once() == 10);
  ex.run_all_reversed();
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{6});
    CHECK(e.committed() == co::position{6});
    CHECK_FALSE(e.lost());
  }
  CHECK(st.load() == co::position{6});
  CHECK(inner.size() == 9);  // 7, 8, 9 were written too, and will be replayed harmlessly
}

TEST_CASE("dead letters under an executor: the position passes the record once it is set aside") {
  order_log log = make_log(10, 10);
  guarded_table inner;
  using sink_t = co::memory::synchronized<flaky_sink<guarded_table>>;
  sink_t sink(inner, std::map<co::offset, int>{{co::offset{3}, -1}});
  store st;
  executor ex;
  co::memory::dead_letters<order_event> dl;
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<store>,
               co::with_executor<executor>, co::with_error_handling<co::dead_letter<2>>,
               co::with_dead_letters<co::memory::dead_letters<order_event>>>
      p(log, sink, st, dl, ex, co::settings{.batch_size = 10});
  CHECK(p.run() == 10);
  REQUIRE(dl.letters().size() == 1);
  CHECK(dl.letters()[0].source_offset == co::offset{3});
  CHECK(dl.letters()[0].reason == "sink rejected offset 3");
  CHECK(st.load() == co::position{10});
  CHECK(inner.size() == 9);
}

TEST_CASE("back-pressure: no more than max_in_flight writes are outstanding") {
  order_log log = make_log(20, 20);
  concurrent_table table;
  store st;
  executor ex;
  alo p(log, table, st, ex, co::settings{.batch_size = 20, .max_in_flight = 3});
  CHECK(p.poll_once() == 20);
  // The pipeline drove the executor whenever three were outstanding: at most 3 remain.
  CHECK(ex.pending() <= 3);
  ex.run_all();  // the last writes land in hand-out order
  CHECK(ex.pending() == 0);
  CHECK(p.run() == 0);
  CHECK(table.inner().size() == 20);
  CHECK(st.load() == co::position{20});
}

namespace {
// Drops every task it is given: what an executor shutting down, or a full queue that discards,
// does to a pipeline's writes.
struct dropping_executor {
  std::size_t dropped = 0;
  void execute(std::function<void()>) { ++dropped; }
};
}  // namespace

TEST_CASE("a write the executor drops is reported, never silently left behind") {
  order_log log = make_log(6, 6);
  concurrent_table table;
  store st;
  dropping_executor ex;
  co::pipeline<order_log, concurrent_table, co::AtLeastOnce<>, co::with_store<store>,
               co::with_executor<dropping_executor>>
      p(log, table, st, ex, co::settings{.batch_size = 6});
  try {
    p.run();
    FAIL("a dropped write must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{0});
    CHECK(e.committed() == co::position{0});
    CHECK(std::string(e.what()).find("the executor dropped the write of offset 0") !=
          std::string::npos);
  }
  CHECK(ex.dropped == 6);
  CHECK_FALSE(st.load().has_value());
}

TEST_CASE("an executor's writes commit the position of a source whose records name partition 3") {
  // The records of a single-partition source may name their stream's partition; completions
  // are still partition 0's, the one the pipeline commits. Tracked under the record's partition,
  // they would never move partition 0's position, and every restart would replay everything.
  order_log log = make_log(10, 10);
  named_partition_log src(log, co::partition_id{3});
  concurrent_table table;
  store st;
  executor ex;
  co::pipeline<named_partition_log, concurrent_table, co::AtLeastOnce<>, co::with_store<store>,
               co::with_executor<executor>>
      p(src, table, st, ex, co::settings{.batch_size = 4});
  CHECK(p.poll_once() == 4);
  ex.run_all();
  CHECK(p.poll_once() == 4);  // the commit step covers 0..3
  CHECK(st.load() == co::position{4});
  ex.run_all();
  CHECK(p.poll_once() == 2);
  ex.run_all();
  CHECK(p.poll_once() == 0);
  CHECK(st.load() == co::position{10});
  CHECK(p.committed_position() == co::position{10});
  CHECK(table.inner().size() == 10);
}
