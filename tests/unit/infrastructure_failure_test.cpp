// Failures that are not a record's: a transaction that will not begin or commit, a position
// store that will not take the position, settings that cannot work. They propagate as they
// are — never as record_failed, never swallowed — and leave nothing half-committed.
#include <doctest/doctest.h>

#include <stdexcept>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
// A guarded transactional table whose begin or commit fails on demand.
struct stubborn_table {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>;
  guarded_tx_table* inner;
  int fail_begins = 0;
  int fail_commits = 0;
  co::write_outcome apply(co::offset o, const order_event& e) { return inner->apply(o, e); }
  void begin() {
    if (fail_begins > 0 && fail_begins-- > 0)
      throw std::runtime_error("cannot begin");
    inner->begin();
  }
  void commit() {
    if (fail_commits > 0 && fail_commits-- > 0)
      throw std::runtime_error("commit refused");
    inner->commit();
  }
  void rollback() { inner->rollback(); }
  void store_position(co::position p) { inner->store_position(p); }
  std::optional<co::position> load_position() const { return inner->load_position(); }
};

struct stubborn_store {
  using capabilities = co::capabilities<co::Volatile>;
  store* inner;
  int fail_commits = 0;
  std::optional<co::position> load() const { return inner->load(); }
  void commit(co::position p) {
    if (fail_commits > 0 && fail_commits-- > 0)
      throw std::runtime_error("store unavailable");
    inner->commit(p);
  }
};
}  // namespace

TEST_CASE("a commit that fails rolls the unit back and propagates as it is") {
  order_log log = make_log(8, 8);
  guarded_tx_table table;
  stubborn_table sink{&table};
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
  stubborn_table sink{&table};
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
