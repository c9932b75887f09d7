// SPDX-License-Identifier: BSL-1.0
// The testing kit: its log, table and store behave like the real things they stand in for.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

TEST_CASE("memory log: offsets grow from 0, poll advances, seek is checked") {
  order_log log = make_log(10, 3);
  CHECK(log.earliest() == co::position{0});
  CHECK(log.end() == co::position{10});
  auto first = log.poll(4);
  REQUIRE(first.size() == 4);
  CHECK(first[0].source_offset == co::offset{0});
  CHECK(first[3].source_offset == co::offset{3});
  CHECK(log.read_position() == co::position{4});
  CHECK(log.poll(100).size() == 6);
  CHECK(log.poll(100).empty());
  log.seek(co::position{8});
  CHECK(log.poll(100).front().source_offset == co::offset{8});
  CHECK_THROWS_AS(log.seek(co::position{11}), co::position_beyond_end);
}

TEST_CASE("memory log: retention deletes from the front and makes old positions lost") {
  order_log log = make_log(10, 3);
  log.truncate_before(co::position{6});
  CHECK(log.earliest() == co::position{6});
  CHECK(log.end() == co::position{10});
  CHECK(log.records().front().source_offset == co::offset{6});
  // The log's own cursor was at 0: it is now behind retention, and says so.
  CHECK_THROWS_AS((void)log.poll(1), co::position_lost);
  try {
    log.seek(co::position{2});
    FAIL("seek below earliest must not succeed");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == co::position{2});
    CHECK(e.earliest() == co::position{6});
  }
  CHECK(log.append(order_event{1, 1, 1}) == co::offset{10});
}

TEST_CASE("memory log: readers are independent cursors over the same records") {
  order_log log = make_log(10, 3);
  auto a = log.make_reader();
  auto b = log.make_reader();
  CHECK(a.poll(4).size() == 4);
  CHECK(b.poll(100).size() == 10);
  CHECK(a.read_position() == co::position{4});
  CHECK(a.poll(100).front().source_offset == co::offset{4});
  log.append(order_event{});
  CHECK(b.poll(100).size() == 1);
  CHECK(b.end() == co::position{11});
}

TEST_CASE("memory table: plain append keeps every write, duplicates included") {
  append_table t;
  t.apply(co::partition_id{0}, co::offset{0}, order_event{1, 1, 10});
  t.apply(co::partition_id{0}, co::offset{0}, order_event{1, 1, 10});
  CHECK(t.size() == 2);
  CHECK(t.applied_watermark() == co::offset{0});
}

TEST_CASE("memory table: an idempotent upsert absorbs a replay by key") {
  upsert_table t;
  t.apply(co::partition_id{0}, co::offset{0}, order_event{1, 1, 10});
  t.apply(co::partition_id{0}, co::offset{0}, order_event{1, 1, 10});
  CHECK(t.size() == 1);
  // Without the offset guard an older record overwrites a newer one: last writer wins.
  t.apply(co::partition_id{0}, co::offset{5}, order_event{1, 1, 50});
  t.apply(co::partition_id{0}, co::offset{2}, order_event{1, 1, 20});
  CHECK(t.find({1})->row.total_cents == 20);
}

TEST_CASE("memory table: the offset guard keeps the newer row") {
  guarded_table t;
  CHECK(t.apply(co::partition_id{0}, co::offset{5}, order_event{1, 1, 50}) ==
        co::write_outcome::applied);
  CHECK(t.apply(co::partition_id{0}, co::offset{2}, order_event{1, 1, 20}) ==
        co::write_outcome::absorbed);
  CHECK(t.apply(co::partition_id{0}, co::offset{5}, order_event{1, 1, 50}) ==
        co::write_outcome::absorbed);
  CHECK(t.find({1})->row.total_cents == 50);
  CHECK(t.find({1})->source_offset == co::offset{5});
  CHECK(t.apply(co::partition_id{0}, co::offset{6}, order_event{1, 1, 60}) ==
        co::write_outcome::applied);
  CHECK(t.find({1})->row.total_cents == 60);
}

TEST_CASE("memory table: a rolled-back transaction leaves rows and position untouched") {
  guarded_tx_table t;
  t.begin();
  t.apply(co::partition_id{0}, co::offset{0}, order_event{1, 1, 10});
  t.store_position(co::partition_id{0}, co::position{1});
  t.commit();
  CHECK(t.load_position() == co::position{1});

  t.begin();
  t.apply(co::partition_id{0}, co::offset{1}, order_event{1, 1, 11});  // update
  t.apply(co::partition_id{0}, co::offset{2}, order_event{2, 1, 12});  // insert
  t.store_position(co::partition_id{0}, co::position{3});
  t.rollback();
  CHECK(t.size() == 1);
  CHECK(t.find({1})->row.total_cents == 10);
  CHECK(t.find({2}) == nullptr);
  CHECK(t.load_position() == co::position{1});
  CHECK(t.applied_watermark() == co::offset{0});
  CHECK(t.commits() == 1);
}

TEST_CASE("memory position store: load what was committed") {
  store s;
  CHECK_FALSE(s.load().has_value());
  s.commit(co::partition_id{0}, co::position{4});
  s.commit(co::partition_id{0}, co::position{9});
  CHECK(s.load() == co::position{9});
  CHECK(s.commits() == 2);
}

TEST_CASE("memory position store: a fingerprint goes with its partition's position") {
  store s;
  s.commit(co::partition_id{0}, co::position{4}, 0xA0);
  s.commit(co::partition_id{1}, co::position{7});
  s.commit(co::partition_id{2}, co::position{2}, 0xC2);

  CHECK(s.load(co::partition_id{0}) == co::position{4});
  CHECK(s.loaded_fingerprint() == std::uint64_t{0xA0});
  CHECK(s.load(co::partition_id{1}) == co::position{7});
  CHECK_FALSE(s.loaded_fingerprint().has_value());  // stored without one
  CHECK(s.load(co::partition_id{2}) == co::position{2});
  CHECK(s.loaded_fingerprint() == std::uint64_t{0xC2});
  CHECK_FALSE(s.load(co::partition_id{3}).has_value());
  CHECK_FALSE(s.loaded_fingerprint().has_value());  // nothing loaded: no stale fingerprint

  // A later commit without a fingerprint drops the one the position no longer follows.
  s.commit(co::partition_id{0}, co::position{5});
  CHECK(s.load(co::partition_id{0}) == co::position{5});
  CHECK_FALSE(s.loaded_fingerprint().has_value());
  CHECK(s.commits() == 4);
}

namespace {

struct part_event {
  std::int64_t id;
  std::int64_t value;
};
using part_table = co::memory::table<
    part_event, co::key<&part_event::id>,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>>;

// The table, failing once (the world's failure, not the record's) at the n-th row written.
struct failing_once final {
  using row_type = part_event;
  using key_type = co::key<&part_event::id>;
  using capabilities = part_table::capabilities;
  part_table* t;
  int fail_at;
  int rows = 0;
  co::write_outcome apply(co::offset o, const part_event& e) {
    return apply(co::partition_id{0}, o, e);
  }
  co::write_outcome apply(co::partition_id k, co::offset o, const part_event& e) {
    if (rows++ == fail_at)
      throw co::infrastructure_error("the table is unavailable, once");
    return t->apply(k, o, e);
  }
  void begin() { t->begin(); }
  void commit() { t->commit(); }
  void rollback() noexcept { t->rollback(); }
  void store_position(co::partition_id k, co::position p) { t->store_position(k, p); }
  void store_position(co::partition_id k, co::position p, co::epoch e) {
    t->store_position(k, p, e);
  }
  [[nodiscard]] std::optional<co::position> load_position(co::partition_id k) const {
    return t->load_position(k);
  }
  std::optional<co::position> claim(co::partition_id k, co::epoch e) { return t->claim(k, e); }
  co::claimed claim_next(co::partition_id k) { return t->claim_next(k); }
  [[nodiscard]] std::int64_t era() const { return t->era(); }
  void check_partition_count(std::size_t n) { t->check_partition_count(n); }
};

}  // namespace

TEST_CASE("memory group: after a failure the member delivers its assignment again") {
  for (const auto protocol :
       {co::memory::rebalance_protocol::eager, co::memory::rebalance_protocol::cooperative}) {
    co::memory::partitioned_log<part_event> log(2);
    for (std::int64_t i = 0; i < 20; ++i)
      log.append(co::partition_id{static_cast<std::int32_t>(i % 2)}, part_event{i, i});
    co::memory::group<part_event> g(log, protocol);
    auto consumer = g.consumer_of(g.join());
    part_table table;
    failing_once sink{&table, 5};
    co::pipeline<decltype(consumer), failing_once, co::TransactionalPosition<>> p(
        consumer, sink, co::settings{.batch_size = 4});
    CHECK(p.poll_once() == 4);
    CHECK_THROWS_AS(p.poll_once(), co::infrastructure_error);
    // Recovering, the pipeline trusts nothing of the assignment it took: the member delivers it
    // again (claimed at the same generation), and each partition restarts at its stored
    // position. Before, the member kept quiet, and every later unit was fenced at epoch -1.
    while (p.poll_once() != 0) {
    }
    CHECK(table.size() == 20);
    CHECK(table.load_position(co::partition_id{0}) == co::position{10});
    CHECK(table.load_position(co::partition_id{1}) == co::position{10});
    CHECK(table.owner(co::partition_id{0}) == co::epoch::of(0, g.generation()));
  }
}

// ---- memory::transactional_log ----------------------------------------------------------------

namespace {
using txn_log = co::memory::transactional_log<order_event>;
std::vector<std::int64_t> source_offsets(
    const std::vector<co::memory::log_message<order_event>>& v) {
  std::vector<std::int64_t> out;
  for (const auto& m : v)
    out.push_back(m.source_offset.value());
  return out;
}
}  // namespace

TEST_CASE("memory transactional log: an abort stays in the log, shown only uncommitted") {
  txn_log log;
  const co::partition_id p0{0};
  log.begin();
  log.apply(p0, co::offset{0}, order_event{1, 10});
  log.apply(p0, co::offset{1}, order_event{2, 20});
  log.store_position(p0, co::position{2});
  log.rollback();
  CHECK(log.read_committed().empty());
  CHECK(source_offsets(log.read_uncommitted()) == std::vector<std::int64_t>{0, 1});
  CHECK(log.load_position() == std::nullopt);  // the staged position went with the abort
  // Two messages and the abort's marker: the redo's messages start at offset 3.
  CHECK(log.end_offset() == 3);
  log.begin();
  log.apply(p0, co::offset{0}, order_event{1, 10});
  log.apply(p0, co::offset{1}, order_event{2, 20});
  log.store_position(p0, co::position{2});
  log.commit();
  const auto committed = log.read_committed();
  REQUIRE(committed.size() == 2);
  CHECK(committed[0].at == 3);
  CHECK(committed[1].at == 4);
  CHECK(source_offsets(log.read_uncommitted()) == std::vector<std::int64_t>{0, 1, 0, 1});
  CHECK(log.load_position() == co::position{2});
  CHECK(log.commits() == 1);
  CHECK(log.aborts() == 1);
  CHECK(log.end_offset() == 6);
}

TEST_CASE("memory transactional log: an open transaction holds read_committed readers back") {
  txn_log log;
  const co::partition_id p0{0};
  log.begin();
  log.apply(p0, co::offset{0}, order_event{1, 10});
  log.commit();
  log.begin();
  log.apply(p0, co::offset{1}, order_event{2, 20});
  CHECK(log.in_transaction());
  CHECK(log.last_stable_offset() == 2);  // the open transaction's first message
  CHECK(source_offsets(log.read_committed()) == std::vector<std::int64_t>{0});
  CHECK(source_offsets(log.read_uncommitted()) == std::vector<std::int64_t>{0, 1});
  log.commit();
  CHECK(log.last_stable_offset() == log.end_offset());
  CHECK(source_offsets(log.read_committed()) == std::vector<std::int64_t>{0, 1});
  // A transaction that wrote nothing leaves no marker.
  const auto end = log.end_offset();
  log.begin();
  log.store_position(p0, co::position{2});
  log.commit();
  CHECK(log.end_offset() == end);
  CHECK(log.load_position() == co::position{2});
}

TEST_CASE("memory transactional log: writes only inside a transaction, fences older owners") {
  txn_log log;
  const co::partition_id p0{0};
  CHECK_THROWS_AS(log.apply(p0, co::offset{0}, order_event{1, 10}), std::logic_error);
  log.begin();
  CHECK_THROWS_AS(log.begin(), std::logic_error);
  const co::claimed first = log.claim_next(p0);
  CHECK(first.stored == std::nullopt);
  log.commit();
  log.begin();
  const co::claimed second = log.claim_next(p0);
  log.commit();
  CHECK(first.owner < second.owner);
  CHECK(log.owner(p0) == second.owner);
  log.begin();
  CHECK_THROWS_AS(log.store_position(p0, co::position{1}, first.owner), co::fenced);
  CHECK_THROWS_AS(log.claim(p0, first.owner), co::fenced);
  log.store_position(p0, co::position{1}, second.owner);
  log.commit();
  CHECK(log.load_position(p0) == co::position{1});
}

TEST_CASE("memory transactional log: fencing inside one transaction sees its own claim") {
  txn_log log;
  const co::partition_id p0{0};
  log.begin();
  const co::claimed a = log.claim_next(p0);
  const co::claimed b = log.claim_next(p0);
  CHECK(a.owner < b.owner);
  log.store_position(p0, co::position{1}, b.owner);  // the owner it just claimed
  CHECK_THROWS_AS(log.claim(p0, a.owner), co::fenced);
  log.commit();
  CHECK(log.owner(p0) == b.owner);
}
