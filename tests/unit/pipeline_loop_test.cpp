// SPDX-License-Identifier: BSL-1.0
// The loop runs the policy's steps in the policy's order, over real (in-memory) parts.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "support/orders.hpp"
#include "support/recording.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
// The expected final state of orders_flat: the last event of each order wins.
std::map<std::int64_t, std::int64_t> expected_totals(const order_log& log) {
  std::map<std::int64_t, std::int64_t> m;
  for (const auto& r : log.records())
    m[r.event.order_id] = r.event.total_cents;
  return m;
}
template <class Table>
std::map<std::int64_t, std::int64_t> totals(const Table& t) {
  std::map<std::int64_t, std::int64_t> m;
  t.for_each([&](const auto& r) { m[r.row.order_id] = r.row.total_cents; });
  return m;
}
}  // namespace

TEST_CASE("each step list is executed in its own order") {
  order_log log = make_log(3, 3);
  trace t;

  SUBCASE("AtMostOnce: commit the position, then write") {
    recording_sink<> sink{&t};
    recording_store st{&t};
    co::pipeline<order_log, recording_sink<>, co::AtMostOnce<>, co::with_store<recording_store>> p(
        log, sink, st);
    CHECK(p.poll_once() == 3);
    CHECK(t == trace{"commit position 3", "apply 0", "apply 1", "apply 2"});
  }
  SUBCASE("AtLeastOnce: write, then commit the position") {
    recording_sink<co::Idempotent> sink{&t};
    recording_store st{&t};
    co::pipeline<order_log, recording_sink<co::Idempotent>, co::AtLeastOnce<>,
                 co::with_store<recording_store>>
        p(log, sink, st);
    CHECK(p.poll_once() == 3);
    CHECK(t == trace{"apply 0", "apply 1", "apply 2", "commit position 3"});
  }
  SUBCASE("AtLeastOnce<EveryRecord>: one commit per record") {
    recording_sink<co::Idempotent> sink{&t};
    recording_store st{&t};
    co::pipeline<order_log, recording_sink<co::Idempotent>, co::AtLeastOnce<co::EveryRecord>,
                 co::with_store<recording_store>>
        p(log, sink, st);
    CHECK(p.poll_once() == 3);
    CHECK(t == trace{"apply 0", "commit position 1", "apply 1", "commit position 2", "apply 2",
                     "commit position 3"});
  }
  SUBCASE("TransactionalPosition: rows and position in one transaction") {
    using sink_t = recording_sink<co::Idempotent, co::OffsetGuarded, co::Transactional>;
    sink_t sink{&t};
    co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink);
    CHECK(p.poll_once() == 3);
    // Recovery reads the position inside a transaction of its own, then the unit runs.
    CHECK(t ==
          trace{"begin", "commit", "begin", "apply 0", "apply 1", "apply 2", "store 3", "commit"});
  }
  SUBCASE("a user-defined order runs as written") {
    struct WriteInTxThenCommitPosition final {
      using trigger = co::EveryBatch;
      using steps = co::step_list<co::Poll, co::Begin, co::Write, co::Commit, co::CommitPosition>;
    };
    using sink_t = recording_sink<co::Idempotent, co::Transactional>;
    sink_t sink{&t};
    recording_store st{&t};
    co::pipeline<order_log, sink_t, WriteInTxThenCommitPosition, co::with_store<recording_store>> p(
        log, sink, st);
    CHECK(p.poll_once() == 3);
    CHECK(t == trace{"begin", "apply 0", "apply 1", "apply 2", "commit", "commit position 3"});
  }
}

TEST_CASE("a batch above the sink's MaxTransactionRows is split; the position moves per split") {
  order_log log = make_log(7, 7);
  trace t;
  using sink_t = recording_sink<co::Idempotent, co::OffsetGuarded, co::Transactional,
                                co::MaxTransactionRows<3>>;
  sink_t sink{&t};
  co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink);
  CHECK(p.poll_once() == 7);
  // clang-format off
  CHECK(t == trace{"begin", "commit",  // recovery
                   "begin", "apply 0", "apply 1", "apply 2", "store 3", "commit",
                   "begin", "apply 3", "apply 4", "apply 5", "store 6", "commit",
                   "begin", "apply 6", "store 7", "commit"});
  // clang-format on
}

TEST_CASE("every policy consumes the log into the table it should") {
  order_log log = make_log(1000, 37);
  const auto want = expected_totals(log);

  SUBCASE("TransactionalPosition") {
    guarded_tx_table table;
    co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>> p(
        log, table, co::settings{.batch_size = 64});
    CHECK(p.recover() == co::position{0});
    CHECK(p.run() == 1000);
    CHECK(totals(table) == want);
    CHECK(table.load_position() == co::position{1000});
    CHECK(p.committed_position() == co::position{1000});
    CHECK(p.read_position() == co::position{1000});
    CHECK(table.commits() == 1 + 16);  // recovery, then ceil(1000 / 64) units
  }
  SUBCASE("AtLeastOnce") {
    guarded_table table;
    store st;
    co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>> p(
        log, table, st, co::settings{.batch_size = 100});
    CHECK(p.run() == 1000);
    CHECK(totals(table) == want);
    CHECK(st.load() == co::position{1000});
    CHECK(st.commits() == 10);
  }
  SUBCASE("AtMostOnce") {
    append_table table;
    store st;
    co::pipeline<order_log, append_table, co::AtMostOnce<>, co::with_store<store>> p(log, table,
                                                                                     st);
    CHECK(p.run() == 1000);
    CHECK(table.size() == 1000);  // append: one row per record, none lost without a crash
    CHECK(st.load() == co::position{1000});
  }
}

TEST_CASE("a restarted pipeline resumes from the stored position") {
  order_log log = make_log(10, 10);
  guarded_tx_table table;
  {
    co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>> first(
        log, table, co::settings{.batch_size = 4});
    CHECK(first.poll_once() == 4);
  }
  for (int i = 0; i < 5; ++i)
    log.append(order_event{100 + i, 1, 1});
  co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>> second(
      log, table, co::settings{.batch_size = 4});
  CHECK(second.recover() == co::position{4});
  CHECK(second.run() == 11);
  CHECK(table.load_position() == co::position{15});
  CHECK(table.size() == 15);
}

TEST_CASE("a failed write inside the transaction rolls back the unit") {
  // Owns its table; everything but apply is forwarded.
  struct failing_sink : co::memory::forwarding_sink<guarded_tx_table> {
    co::offset fail_at;
    explicit failing_sink(co::offset at) : fail_at(at) {}
    co::write_outcome apply(co::offset o, const order_event& e) {
      if (o == fail_at)
        throw std::runtime_error("sink refused the row");
      return inner().apply(co::partition_id{0}, o, e);
    }
  };
  order_log log = make_log(10, 10);
  failing_sink sink{co::offset{6}};
  co::pipeline<order_log, failing_sink, co::TransactionalPosition<>> p(
      log, sink, co::settings{.batch_size = 4});
  CHECK(p.poll_once() == 4);
  CHECK_THROWS_AS(p.poll_once(), co::record_failed);
  CHECK(sink.inner().size() == 4);  // records 4 and 5 of the failed unit were rolled back
  CHECK(sink.inner().load_position() == co::position{4});
  CHECK(p.committed_position() == co::position{4});
}

TEST_CASE("AutoCommit commits the last polled position on a timer, whatever the write did") {
  order_log log = make_log(20, 20);
  upsert_table table;
  store st;
  manual_clock::current = {};
  co::pipeline<order_log, upsert_table, co::AtMostOnce<co::AutoCommit>, co::with_store<store>,
               co::with_clock<manual_clock>>
      p(log, table, st,
        co::settings{.batch_size = 5, .auto_commit_interval = std::chrono::milliseconds{5000}});
  p.recover();
  CHECK(p.poll_once() == 5);
  CHECK_FALSE(st.load().has_value());  // the interval has not passed: nothing committed
  manual_clock::advance(std::chrono::milliseconds{5000});
  CHECK(p.poll_once() == 5);
  // The timer fired right after the poll, before any of the batch was written: the position
  // already covers records 5..9 — a crash now would skip them.
  CHECK(st.load() == co::position{10});
  CHECK(st.commits() == 1);
  CHECK(p.run() == 10);
  CHECK(st.commits() == 1);  // no time passed: no further commits
}
