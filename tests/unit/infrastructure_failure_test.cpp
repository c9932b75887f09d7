// SPDX-License-Identifier: BSL-1.0
// Failures that are not a record's: a transaction that will not begin or commit, a position
// store that will not take the position, settings that cannot work. They propagate as they
// are — never as record_failed, never swallowed — and leave nothing half-committed.
#include <doctest/doctest.h>

#include <stdexcept>

#include "support/flaky.hpp"
#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
// A guarded transactional table whose begin or commit fails on demand.
struct stubborn_table : co::memory::forwarding_sink<guarded_tx_table&> {
  using co::memory::forwarding_sink<guarded_tx_table&>::forwarding_sink;
  int fail_begins = 0;
  int fail_commits = 0;
  void begin() {
    if (fail_begins > 0 && fail_begins-- > 0)
      throw std::runtime_error("cannot begin");
    inner().begin();
  }
  void commit() {
    if (fail_commits > 0 && fail_commits-- > 0)
      throw std::runtime_error("commit refused");
    inner().commit();
  }
};

struct stubborn_store {
  using capabilities = co::capabilities<co::Volatile>;
  store* inner;
  int fail_commits = 0;
  std::optional<co::position> load() { return inner->load(); }
  void commit(co::position p) {
    if (fail_commits > 0 && fail_commits-- > 0)
      throw std::runtime_error("store unavailable");
    inner->commit(co::partition_id{0}, p);
  }
};
}  // namespace

TEST_CASE("a commit that fails rolls the unit back and propagates as it is") {
  order_log log = make_log(8, 8);
  guarded_tx_table table;
  stubborn_table sink{table};
  co::pipeline<order_log, stubborn_table, co::TransactionalPosition<>> p(
      log, sink, co::settings{.batch_size = 4});
  CHECK(p.poll_once() == 4);
  sink.fail_commits = 1;
  CHECK_THROWS_WITH_AS(p.poll_once(), "commit refused", std::runtime_error);
  CHECK(table.size() == 4);  // the unit's rows went with its transaction
  CHECK(table.load_position() == co::position{4});
  CHECK(p.committed_position() == co::position{4});
  // The next poll recovers from the durable position and finishes.
  CHECK(p.run() == 4);
  CHECK(table.size() == 8);
  CHECK(table.load_position() == co::position{8});
}

TEST_CASE("a transaction that will not begin leaves nothing written") {
  order_log log = make_log(4, 4);
  guarded_tx_table table;
  stubborn_table sink{table};
  co::pipeline<order_log, stubborn_table, co::TransactionalPosition<>> p(log, sink);
  p.recover();
  sink.fail_begins = 1;
  CHECK_THROWS_WITH_AS(p.poll_once(), "cannot begin", std::runtime_error);
  CHECK(table.size() == 0);
  CHECK_FALSE(table.load_position().has_value());
  CHECK(p.run() == 4);
}

TEST_CASE("a position store that fails: the written unit is replayed, never skipped") {
  order_log log = make_log(6, 6);
  guarded_table table;
  store durable;
  stubborn_store st{&durable};
  using pipeline_t =
      co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<stubborn_store>,
                   co::with_observer<co::counting_observer>>;
  pipeline_t p(log, table, st, co::settings{.batch_size = 3});
  st.fail_commits = 1;
  CHECK_THROWS_WITH_AS(p.poll_once(), "store unavailable", std::runtime_error);
  CHECK(table.size() == 3);                 // written...
  CHECK_FALSE(durable.load().has_value());  // ...but not vouched for
  CHECK(p.run() == 6);                      // recovers at 0: the three are replayed and absorbed
  CHECK(p.observer().replays_absorbed == 3);
  CHECK(durable.load() == co::position{6});
}

TEST_CASE("settings that cannot work are refused at construction") {
  order_log log = make_log(1, 1);
  guarded_table table;
  store st;
  using alo = co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>>;
  CHECK_THROWS_AS(alo(log, table, st, co::settings{.batch_size = 0}), std::invalid_argument);
  // An owner epoch on a pipeline that cannot fence would be silently ignored.
  CHECK_THROWS_AS(alo(log, table, st, co::settings{.owner_epoch = co::epoch{3}}),
                  std::invalid_argument);
  guarded_tx_table tx;
  CHECK_NOTHROW(co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>>(
      log, tx, co::settings{.owner_epoch = co::epoch{3}}));
}

namespace {
// A sink that fails the n-th apply with a chosen error: the record's (a std::runtime_error, as a
// refused value) or the world's (an infrastructure_error, as a full disk).
template <class Inner>
struct failing_sink : test_support::flaky_sink<Inner> {
  using test_support::flaky_sink<Inner>::flaky_sink;
  bool world = true;
  bool rollback_throws = false;
  co::write_outcome apply(co::offset o, const order_event& e) {
    if (this->failures.contains(o) && this->failures[o] != 0) {
      if (this->failures[o] > 0)
        --this->failures[o];
      if (world)
        throw co::infrastructure_error("disk full");
      throw std::runtime_error("value refused");
    }
    return this->inner().apply(co::partition_id{0}, o, e);
  }
  void rollback() requires co::partitioned_transactional_sink<Inner> {
    this->inner().rollback();
    if (rollback_throws)
      throw co::infrastructure_error("connection lost during ROLLBACK");
  }
};
}  // namespace

TEST_CASE("an infrastructure error is never dead-lettered: the position stays below the record") {
  SUBCASE("AtLeastOnce, per-record dead letters") {
    order_log log = make_log(6, 6);
    guarded_table table;
    failing_sink<guarded_table> sink{table};
    sink.failures[co::offset{3}] = 1;
    store st;
    co::memory::dead_letters<order_event> letters;
    co::pipeline<order_log, failing_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
                 co::with_error_handling<co::dead_letter<2>>,
                 co::with_dead_letters<co::memory::dead_letters<order_event>>>
        p(log, sink, st, letters);
    CHECK_THROWS_WITH_AS(p.poll_once(), "disk full", co::infrastructure_error);
    CHECK(letters.letters().empty());
    CHECK_FALSE(st.load().has_value());  // nothing vouched for past (or before) the failure
    // The world recovers: the unit is redone and nothing is missing.
    CHECK(p.run() == 6);
    CHECK(table.size() == 6);
    CHECK(st.load() == co::position{6});
    CHECK(letters.letters().empty());
  }
  SUBCASE("TransactionalPosition, whole-unit dead letters") {
    order_log log = make_log(6, 6);
    guarded_tx_table table;
    failing_sink<guarded_tx_table> sink{table};
    sink.failures[co::offset{2}] = 1;
    co::memory::dead_letters<order_event> letters;
    co::pipeline<order_log, failing_sink<guarded_tx_table>, co::TransactionalPosition<>,
                 co::with_error_handling<co::dead_letter<2>>,
                 co::with_dead_letters<co::memory::dead_letters<order_event>>>
        p(log, sink, letters);
    CHECK_THROWS_AS(p.poll_once(), co::infrastructure_error);
    CHECK(letters.letters().empty());
    CHECK(table.size() == 0);
    CHECK_FALSE(table.load_position().has_value());
    CHECK(p.run() == 6);
    CHECK(table.load_position() == co::position{6});
  }
  SUBCASE("the same failure as the record's is dead-lettered (the control)") {
    order_log log = make_log(6, 6);
    guarded_table table;
    failing_sink<guarded_table> sink{table};
    sink.world = false;
    sink.failures[co::offset{3}] = -1;
    store st;
    co::memory::dead_letters<order_event> letters;
    co::pipeline<order_log, failing_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
                 co::with_error_handling<co::dead_letter<2>>,
                 co::with_dead_letters<co::memory::dead_letters<order_event>>>
        p(log, sink, st, letters);
    CHECK(p.run() == 6);
    REQUIRE(letters.letters().size() == 1);
    CHECK(letters.letters().front().source_offset == co::offset{3});
  }
}

TEST_CASE("an infrastructure error in the middle of a unit propagates as it is") {
  // Under stop a plain sink's unit is written by one loop (with g++, the one that leaves a trace of
  // its row, pipeline_impl::rows_apart): the world's failure passes through it as it is, never as
  // record_failed.
  order_log log = make_log(6, 6);
  guarded_table table;
  failing_sink<guarded_table> sink{table};
  sink.failures[co::offset{3}] = 1;
  store st;
  co::pipeline<order_log, failing_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>> p(
      log, sink, st);
  CHECK_THROWS_WITH_AS(p.poll_once(), "disk full", co::infrastructure_error);
  CHECK_FALSE(st.load().has_value());
  CHECK(p.run() == 6);
  CHECK(st.load() == co::position{6});

  order_log log2 = make_log(6, 6);
  append_table appended;
  failing_sink<append_table> lossy{appended};
  lossy.failures[co::offset{4}] = 1;
  store st2;
  co::pipeline<order_log, failing_sink<append_table>, co::AtMostOnce<>, co::with_store<store>> q(
      log2, lossy, st2);
  CHECK_THROWS_WITH_AS(q.poll_once(), "disk full", co::infrastructure_error);
  CHECK(appended.size() == 4);
  CHECK(st2.load() == co::position{6});  // committed before the write, as the policy says
}

TEST_CASE("a rollback that throws is the sink's failure, not the record's") {
  order_log log = make_log(4, 4);
  guarded_tx_table table;
  failing_sink<guarded_tx_table> sink{table};
  sink.world = false;  // the record's own failure starts it...
  sink.failures[co::offset{1}] = 1;
  sink.rollback_throws = true;  // ...and the rollback fails too
  co::pipeline<order_log, failing_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_observer<co::counting_observer>>
      p(log, sink);
  bool nested_original = false;
  try {
    p.poll_once();
    FAIL("the pipeline did not report the failed rollback");
  } catch (const co::rollback_failed& e) {
    CHECK(std::string(e.what()).find("connection lost during ROLLBACK") != std::string::npos);
    try {
      std::rethrow_if_nested(e);
    } catch (const std::runtime_error& original) {
      nested_original = std::string(original.what()) == "value refused";
    }
  }
  CHECK(nested_original);
  CHECK(p.observer().records_failed == 0);  // no record was blamed
  CHECK_FALSE(table.load_position().has_value());
}
