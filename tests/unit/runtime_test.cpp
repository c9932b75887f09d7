// SPDX-License-Identifier: BSL-1.0
// Splits, progress, observers, fencing and fault points: the rest of what the loop owes.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/flaky.hpp"
#include "support/orders.hpp"
#include "support/recording.hpp"

namespace co = commit_order;
using namespace test_support;

// ---- splits: the position advances per split under every policy -----------------------------

TEST_CASE("splits follow the smallest of the static, the sink's and the settings' limits") {
  order_log log = make_log(10, 10);
  trace t;
  recording_store st{&t};

  SUBCASE("AtLeastOnce, settings limit 4") {
    recording_sink<co::Idempotent> sink{&t};
    co::pipeline<order_log, recording_sink<co::Idempotent>, co::AtLeastOnce<>,
                 co::with_store<recording_store>>
        p(log, sink, st, co::settings{.batch_size = 10, .max_transaction_rows = 4});
    CHECK(p.poll_once() == 10);
    CHECK(t == trace{"apply 0", "apply 1", "apply 2", "apply 3", "commit position 4", "apply 4",
                     "apply 5", "apply 6", "apply 7", "commit position 8", "apply 8", "apply 9",
                     "commit position 10"});
  }
  SUBCASE("AtMostOnce, static MaxTransactionRows<5>") {
    recording_sink<co::MaxTransactionRows<5>> sink{&t};
    co::pipeline<order_log, recording_sink<co::MaxTransactionRows<5>>, co::AtMostOnce<>,
                 co::with_store<recording_store>>
        p(log, sink, st, co::settings{.batch_size = 10});
    CHECK(p.poll_once() == 10);
    CHECK(t == trace{"commit position 5", "apply 0", "apply 1", "apply 2", "apply 3", "apply 4",
                     "commit position 10", "apply 5", "apply 6", "apply 7", "apply 8", "apply 9"});
  }
}

TEST_CASE("a run-time limit from the sink splits TransactionalPosition units") {
  order_log log = make_log(10, 10);
  guarded_tx_table table;
  table.set_max_transaction_rows(3);
  co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>,
               co::with_observer<co::counting_observer>>
      p(log, table, co::settings{.batch_size = 10});
  CHECK(p.run() == 10);
  CHECK(p.observer().units_committed == 4);  // 3 + 3 + 3 + 1
  CHECK(table.commits() == 1 + 4);
}

TEST_CASE("a crash between splits re-applies at most the split in flight") {
  order_log log = make_log(10, 10);
  guarded_tx_table table;
  using pipeline_t =
      co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>,
                   co::with_faults<co::crash_at_nth>, co::with_observer<co::counting_observer>>;
  {
    pipeline_t p(log, table, co::settings{.batch_size = 10, .max_transaction_rows = 4});
    // Crash once the second split has written two rows, before its commit. A split of 4 has
    // 9 fault points (after poll, after begin, 4 rows, after write, after store, after commit);
    // the second split's 4th point is its second row.
    p.faults().crash_at = 9 + 3;
    CHECK_THROWS_AS(p.poll_once(), co::injected_crash);
  }
  CHECK(table.load_position() == co::position{4});  // the first split is durable
  CHECK(table.size() == 4);                         // the second split's rows were discarded
  pipeline_t restarted(log, table, co::settings{.batch_size = 10, .max_transaction_rows = 4});
  CHECK(restarted.recover() == co::position{4});
  CHECK(restarted.run() == 6);
  CHECK(restarted.observer().replays_absorbed == 0);
  CHECK(table.size() == 10);
}

TEST_CASE("an order that writes outside its position's transaction recovers from its own gap") {
  // poll -> write -> begin -> store position -> commit: MayDuplicate. A crash after the write
  // leaves rows newer than the stored position; that is this order's declared replay, not the
  // invariant violation it would be when rows and position share the transaction.
  struct WriteThenPositionTx final {
    using trigger = co::EveryBatch;
    using steps = co::step_list<co::Poll, co::Write, co::Begin, co::StorePosition, co::Commit>;
  };
  static_assert(std::is_same_v<co::guarantee_t<WriteThenPositionTx>, co::MayDuplicate>);
  order_log log = make_log(10, 10);
  guarded_tx_table table;
  using pipeline_t =
      co::pipeline<order_log, guarded_tx_table, WriteThenPositionTx,
                   co::with_faults<co::crash_at_nth>, co::with_observer<co::counting_observer>>;
  {
    pipeline_t p(log, table, co::settings{.batch_size = 5});
    p.faults().crash_at = 1 + 5;  // after the write of the first unit (0: poll, 1..5: rows)
    CHECK_THROWS_AS(p.poll_once(), co::injected_crash);
  }
  CHECK(table.size() == 5);
  CHECK_FALSE(table.load_position().has_value());
  pipeline_t restarted(log, table, co::settings{.batch_size = 5});
  CHECK(restarted.recover() == co::position{0});
  CHECK(restarted.run() == 10);
  CHECK(restarted.observer().replays_absorbed == 5);
  CHECK(table.load_position() == co::position{10});
}

// ---- progress is not position ----------------------------------------------------------------

TEST_CASE("progress reports read, committed, applied and end separately") {
  order_log log = make_log(100, 100);
  guarded_table table;
  store st;
  co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>,
               co::with_faults<co::crash_at_nth>>
      p(log, table, st, co::settings{.batch_size = 40});
  p.recover();
  co::progress before = p.progress();
  CHECK(before.unread() == 100);
  CHECK(before.reports_watermark);
  CHECK(before.unapplied() == 0);  // nothing read, so nothing read and not applied
  CHECK_FALSE(before.applied_watermark.has_value());

  // Stop after the first unit's write but before its position commit.
  p.faults().crash_at = 1 + 40;  // 0: after poll, 1..40: rows, 41: after write
  CHECK_THROWS_AS(p.poll_once(), co::injected_crash);
  const co::progress mid = p.progress();
  CHECK(mid.read == co::position{40});
  CHECK(mid.committed == co::position{0});
  CHECK(mid.applied_watermark == co::offset{39});
  CHECK(mid.source_end == co::position{100});
  CHECK(mid.unread() == 60);
  CHECK(mid.uncommitted() == 40);
  CHECK(mid.unapplied() == 0);  // applied progress is ahead of the committed position
}

// The dashboard docs/reference.md shows (issue 21, item 14): records not yet in the sink, each
// counted once.
static std::int64_t records_behind(const co::progress& p) {
  return p.unread() + p.unapplied().value_or(p.uncommitted());
}

TEST_CASE(
    "progress: unapplied is empty without a watermark, and a dashboard counts each record once") {
  // A sink without a watermark: nothing says what was applied.
  struct no_watermark_sink {
    using row_type = order_event;
    using key_type = order_key;
    using capabilities = co::capabilities<co::Idempotent, co::Volatile>;
    std::map<std::int64_t, order_event> rows;
    void apply(co::offset, const order_event& e) { rows[e.order_id] = e; }
  };
  {
    order_log log = make_log(30, 30);
    no_watermark_sink table;
    store st;
    co::pipeline<order_log, no_watermark_sink, co::AtLeastOnce<>, co::with_store<store>> p(
        log, table, st, co::settings{.batch_size = 10});
    p.recover();
    CHECK_FALSE(p.progress().reports_watermark);
    CHECK_FALSE(p.progress().unapplied().has_value());
    CHECK(records_behind(p.progress()) == 30);
    p.poll_once();
    CHECK_FALSE(p.progress().unapplied().has_value());
    CHECK(records_behind(p.progress()) == 20);
  }
  // A sink with one, stopped between the write and the commit, then done.
  order_log log = make_log(100, 100);
  guarded_table table;
  store st;
  co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>,
               co::with_faults<co::crash_at_nth>>
      p(log, table, st, co::settings{.batch_size = 40});
  p.recover();
  CHECK(records_behind(p.progress()) == 100);
  p.faults().crash_at = 1 + 40;
  CHECK_THROWS_AS(p.poll_once(), co::injected_crash);
  const co::progress mid = p.progress();
  CHECK(mid.unapplied() == 0);
  CHECK(mid.unread() == 60);
  CHECK(records_behind(mid) == 60);  // the 40 applied are not counted, the 60 unread once
  // Recovered, the pipeline reads the unit again: a replay of what the sink holds is not
  // unapplied (the read position is behind the watermark).
  p.faults().crash_at = static_cast<std::size_t>(-1);
  p.recover();
  CHECK(p.progress().read == co::position{0});
  CHECK(p.progress().unapplied() == 0);
  CHECK(p.progress().unread() == 100);
  while (p.poll_once() != 0) {
  }
  const co::progress done = p.progress();
  CHECK(done.unread() == 0);
  CHECK(done.unapplied() == 0);
  CHECK(done.uncommitted() == 0);
  CHECK(records_behind(done) == 0);
  // A sink holding nothing of the partition: every record read since `earliest` is unapplied.
  co::progress none{};
  none.read = co::position{100};
  none.committed = co::position{100};
  none.source_end = co::position{100};
  none.reports_watermark = true;
  CHECK(none.unapplied() == 100);
  CHECK(none.unapplied(co::position{30}) == 70);
}

TEST_CASE("the observer counts the replays the offset guard absorbed") {
  order_log log = make_log(50, 50);
  guarded_table table;
  store st;
  using pipeline_t =
      co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>,
                   co::with_faults<co::crash_at_nth>, co::with_observer<co::counting_observer>>;
  {
    pipeline_t p(log, table, st, co::settings{.batch_size = 20});
    p.faults().crash_at = 1 + 20;  // after the write (0: poll, 1..20: rows), before the commit
    CHECK_THROWS_AS(p.poll_once(), co::injected_crash);
    CHECK(p.observer().rows_written == 20);
  }
  pipeline_t restarted(log, table, st, co::settings{.batch_size = 20});
  CHECK(restarted.run() == 50);
  CHECK(restarted.observer().replays_absorbed == 20);  // the replayed unit, absorbed
  CHECK(restarted.observer().rows_written == 30);
  CHECK(restarted.observer().polls == 3);
  CHECK(table.size() == 50);
}

// The defaults compile away: no observer, no faults, no transform cost a byte.
using plain = co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>>;
using spelled_out =
    co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>,
                 co::with_observer<co::no_observer>, co::with_faults<co::no_faults>,
                 co::with_transform<co::identity_transform>, co::with_error_handling<co::stop>>;
static_assert(sizeof(plain) == sizeof(spelled_out));
static_assert(std::is_empty_v<co::no_observer> && std::is_empty_v<co::no_faults>);

// ---- fencing ---------------------------------------------------------------------------------

TEST_CASE("an explicit owner epoch of 0 or below is refused at construction") {
  // Epoch 0 is no owner's: two consumers claiming it would share the position without either
  // being fenced, and a position row deleted under them would be recreated by the next store.
  const order_log log = make_log(4, 4);
  auto reader = log.make_reader();
  guarded_tx_table table;
  using pipeline_t = co::pipeline<order_log::reader, guarded_tx_table, co::TransactionalPosition<>>;
  for (const co::epoch e : {co::epoch{0}, co::epoch{-1}}) {
    try {
      pipeline_t p(reader, table, co::settings{.owner_epoch = e});
      FAIL("an owner epoch of 0 or below was accepted");
    } catch (const std::invalid_argument& error) {
      CHECK(std::string(error.what()).find("owner_epoch must be above 0") != std::string::npos);
    }
  }
  CHECK_NOTHROW(pipeline_t(reader, table, co::settings{.owner_epoch = co::epoch{1}}));
}

TEST_CASE("a stale owner is fenced and writes nothing") {
  const order_log log = make_log(30, 30);
  auto zombie_reader = log.make_reader();  // each consumer has its own cursor
  auto successor_reader = log.make_reader();
  guarded_tx_table table;
  using pipeline_t = co::pipeline<order_log::reader, guarded_tx_table, co::TransactionalPosition<>>;
  pipeline_t zombie(zombie_reader, table,
                    co::settings{.batch_size = 10, .owner_epoch = co::epoch{1}});
  CHECK(zombie.poll_once() == 10);
  CHECK(table.owner() == co::epoch{1});

  // A rebalance hands the partition to a new owner, which claims it at a higher epoch.
  pipeline_t successor(successor_reader, table,
                       co::settings{.batch_size = 10, .owner_epoch = co::epoch{2}});
  CHECK(successor.recover() == co::position{10});
  CHECK(table.owner() == co::epoch{2});

  // The old owner does not know yet; its next transaction is refused and rolled back.
  try {
    zombie.poll_once();
    FAIL("a zombie must not advance the position");
  } catch (const co::fenced& e) {
    CHECK(e.mine() == co::epoch{1});
    CHECK(e.current() == co::epoch{2});
  }
  CHECK(table.size() == 10);
  CHECK(table.load_position() == co::position{10});
  // Nor can it come back by recovering at its old epoch.
  CHECK_THROWS_AS(zombie.recover(), co::fenced);

  CHECK(successor.run() == 20);
  CHECK(table.load_position() == co::position{30});
}

// ---- fault points ----------------------------------------------------------------------------

struct recording_faults {
  std::vector<co::fault_point>* seen;
  void at(const co::fault_point& p) { seen->push_back(p); }
};

TEST_CASE("fault points cover every step boundary and every row of a write") {
  order_log log = make_log(3, 3);
  guarded_tx_table table;
  std::vector<co::fault_point> seen;
  co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>,
               co::with_faults<recording_faults>>
      p(log, table);
  p.faults().seen = &seen;
  CHECK(p.poll_once() == 3);
  using k = co::fault_point::kind;
  using s = co::step_kind;
  std::vector<std::pair<k, s>> got;
  for (const auto& f : seen)
    got.emplace_back(f.where, f.step);
  CHECK(got == std::vector<std::pair<k, s>>{{k::after_step, s::poll},
                                            {k::after_step, s::begin},
                                            {k::after_row, s::write},
                                            {k::after_row, s::write},
                                            {k::after_row, s::write},
                                            {k::after_step, s::write},
                                            {k::after_step, s::store_position},
                                            {k::after_step, s::commit}});
  CHECK(seen[3].row == 2);
  CHECK(seen[6].step_index == 3);
  for (const auto& f : seen)
    CHECK(f.unit_end == co::position{3});
}

TEST_CASE("an injected crash bypasses error handling: nothing is committed on the way out") {
  order_log log = make_log(10, 10);
  guarded_table table;
  store st;
  co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>,
               co::with_faults<co::crash_at_nth>, co::with_error_handling<co::retry<3>>>
      p(log, table, st, co::settings{.batch_size = 10});
  p.faults().crash_at = 5;  // 0: after poll, 5: after the 5th row
  CHECK_THROWS_AS(p.poll_once(), co::injected_crash);
  CHECK_FALSE(st.load().has_value());  // no prefix commit: a killed process commits nothing
  CHECK(table.size() == 5);
}
