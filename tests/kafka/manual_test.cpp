// SPDX-License-Identifier: BSL-1.0
// The Kafka sources with a manual assignment (no group) against librdkafka's mock cluster, one
// cluster per test on its own loopback ports: positions into the in-memory table, SQLite and
// Kafka's committed offsets; retention as position_lost; positions past the end; injected
// fetch and commit errors; the configuration the library refuses; and AtMostOnce<AutoCommit>
// on librdkafka's own auto-commit.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <commit_order/adapters/sqlite.hpp>

#include "support.hpp"
#include "support/crash_after.hpp"
#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

using namespace kafka_test;
namespace sq = commit_order::sqlite;
using test_support::crash_after;

namespace {

const co::partition_id p0{0};
const co::partition_id p1{1};
const co::partition_id p2{2};

kf::consumer_options options_for(const kf::mock_cluster& mc, const std::string& topic,
                                 const std::string& group = {}) {
  kf::consumer_options o{.topic = topic, .config = mc.consumer_config()};
  if (!group.empty())
    o.config["group.id"] = group;
  return o;
}

/// A large event: a few of them make the mock's retention (5 MiB per partition) delete the
/// oldest and move the partition's earliest offset.
struct blob final {
  std::int64_t id = 0;
  std::array<std::byte, 60 * 1024> padding{};
};
using blob_table = co::memory::table<
    blob, co::key<&blob::id>,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>>;

void produce_blobs(const kf::mock_cluster& mc, const std::string& topic, std::int64_t from,
                   std::int64_t count, co::partition_id k = p0) {
  kf::producer<blob> p(mc.client_config(), topic);
  auto b = std::make_unique<blob>();
  for (std::int64_t i = 0; i < count; ++i) {
    b->id = from + i;
    p.send(k, *b);
  }
  p.flush();
}

// Not inlined: g++ 12 at -O1 with ASan otherwise warns, falsely, that the table's optional
// watermark snapshot may be destroyed uninitialized (-Wmaybe-uninitialized).
template <class Table>
[[gnu::noinline]] void store_position(Table& t, co::partition_id k, co::position p) {
  t.begin();
  t.store_position(k, p);
  t.commit();
}

}  // namespace

// ---- positions: into the in-memory table, SQLite and Kafka's offsets -----------------------

TEST_CASE("manual assignment: TransactionalPosition into the in-memory table resumes exactly") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 3);
  produced sent;
  produce_orders(mc, "orders", 3, 600, 40, sent);
  order_table<> table;
  using source_t = kf::assigned_source<order, co::TransactionalPosition<>>;
  const auto at_end = [&] {
    for (const auto& [k, v] : sent.by_partition)
      if (table.load_position(k) != co::position{static_cast<std::int64_t>(v.size())})
        return false;
    return true;
  };
  {
    source_t src(options_for(mc, "orders"), {p0, p1, p2});
    co::pipeline<source_t, order_table<>, co::TransactionalPosition<>> p(
        src, table, co::settings{.batch_size = 64});
    CHECK(pump(p, at_end) == 600);
  }
  const auto rows_of = [&] {
    std::map<std::int64_t, shared_table<>::row> rows;
    table.for_each([&](const co::memory::stored_row<order>& r) {
      rows[r.row.order_id] = {r.row, r.source_partition, r.source_offset};
    });
    return rows;
  };
  check_rows_match(rows_of(), sent);

  // A new consumer resumes at the stored positions: the 150 new records, none of the old.
  produce_orders(mc, "orders", 3, 150, 40, sent);
  source_t src(options_for(mc, "orders"), {p0, p1, p2});
  co::pipeline<source_t, order_table<>, co::TransactionalPosition<>> p(
      src, table, co::settings{.batch_size = 64});
  CHECK(pump(p, at_end) == 150);
  check_rows_match(rows_of(), sent);
}

TEST_CASE("manual assignment: one partition into SQLite, the position in the same transaction") {
  using crash_lab::order_event;
  using crash_lab::orders_flat;
  using sink_t = sq::guarded_upsert_sink<orders_flat>;
  using source_t = kf::partition_source<order_event, co::TransactionalPosition<>>;
  test_support::scratch_dir dir;
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  // Partition 1 is read: the sink keeps one position, for the partition its source reads.
  std::vector<order_event> events;
  const auto produce = [&](std::int64_t n) {
    kf::producer<order_event> prod(mc.client_config(), "orders");
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::int64_t>(events.size());
      const order_event e{1 + k % 17, 100 + k % 3, 1000 + k, 1 + k / 17};
      prod.send(p0, order_event{-1, 0, 0, 0});  // another partition's traffic, never read
      prod.send(p1, e);
      events.push_back(e);
    }
    prod.flush();
  };
  produce(300);
  const auto read_all = [&](sink_t& sink, std::int64_t expect) {
    source_t src(options_for(mc, "orders"), p1);
    co::pipeline<source_t, sink_t, co::TransactionalPosition<>> p(src, sink,
                                                                  co::settings{.batch_size = 50});
    const auto n = pump(p, [&] {
      return sink.load_position() == co::position{static_cast<std::int64_t>(events.size())};
    });
    CHECK(n == static_cast<std::size_t>(expect));
  };
  {
    sink_t sink(dir / "orders.sqlite");
    read_all(sink, 300);
  }
  produce(40);
  sink_t sink(dir / "orders.sqlite");
  read_all(sink, 40);  // resumed from the position SQLite kept: nothing read twice

  std::map<std::int64_t, std::pair<order_event, std::int64_t>> last;
  for (std::size_t i = 0; i < events.size(); ++i)
    last[events[i].order_id] = {events[i], static_cast<std::int64_t>(i)};
  auto q = sink.database().prepare(
      "SELECT order_id, customer_id, total_cents, event_seq, source_offset FROM orders_flat");
  std::size_t rows = 0;
  while (q.step()) {
    ++rows;
    const order_event e{q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)};
    REQUIRE(last.contains(e.order_id));
    CHECK(e == last[e.order_id].first);
    CHECK(q.column_int64(4) == last[e.order_id].second);
  }
  CHECK(rows == last.size());
}

TEST_CASE("manual assignment: AtLeastOnce with Kafka's committed offsets as the position store") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produced sent;
  produce_orders(mc, "orders", 2, 400, 30, sent);
  // Kafka's offsets are Replicated; rule R9a wants a sink at least as durable (declared here).
  using table_t = order_table<co::Replicated>;
  using source_t = kf::assigned_source<order, co::AtLeastOnce<>>;
  using pipeline_t =
      co::pipeline<source_t, table_t, co::AtLeastOnce<>, co::with_store<kf::offset_store>>;
  table_t table;
  const auto committed_at_end = [&](kf::offset_store& store) {
    for (const auto& [k, v] : sent.by_partition)
      if (store.load(k) != co::position{static_cast<std::int64_t>(v.size())})
        return false;
    return true;
  };
  {
    source_t src(options_for(mc, "orders", "readers"), {p0, p1});
    kf::offset_store store(src);
    CHECK(store.load(p0) == std::nullopt);  // nothing committed yet
    pipeline_t p(src, table, store, co::settings{.batch_size = 64});
    CHECK(pump(p, [&] { return committed_at_end(store); }) == 400);
    CHECK(store.commits() >= 7);  // one synchronous commit per partition a unit touched
  }
  produce_orders(mc, "orders", 2, 60, 30, sent);
  source_t src(options_for(mc, "orders", "readers"), {p0, p1});
  kf::offset_store store(src);
  pipeline_t p(src, table, store, co::settings{.batch_size = 64});
  CHECK(pump(p, [&] { return committed_at_end(store); }) == 60);  // from the committed offsets
  std::map<std::int64_t, shared_table<>::row> rows;
  table.for_each([&](const co::memory::stored_row<order>& r) {
    rows[r.row.order_id] = {r.row, r.source_partition, r.source_offset};
  });
  check_rows_match(rows, sent);
}

TEST_CASE("manual assignment: AtMostOnce commits to Kafka before it writes") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 100, 100, sent);
  using source_t = kf::partition_source<order, co::AtMostOnce<>>;
  order_table<> table;  // R9b: the store (Replicated) is at least as durable as the sink
  source_t src(options_for(mc, "orders", "at-most-once"), p0);
  kf::partition_offset_store store(src);
  co::pipeline<source_t, order_table<>, co::AtMostOnce<>,
               co::with_store<kf::partition_offset_store>, co::with_faults<crash_after>>
      p(src, table, store, co::settings{.batch_size = 10});
  p.faults() = crash_after{co::step_kind::commit_position, 3};
  // A crash right after the fourth unit's commit: its position is in Kafka, its rows were
  // never written. Nobody writes them again: the loss the type declares.
  CHECK_THROWS_AS(pump(p, [] { return false; }), co::injected_crash);
  const co::position committed = p.committed_position();
  CHECK(store.load() == committed);
  const auto lost = committed.value() - static_cast<std::int64_t>(table.size());
  CHECK(lost >= 1);
  CHECK(lost <= 10);
  // A new consumer starts at the committed position: the rest, without the lost unit.
  source_t again(options_for(mc, "orders", "at-most-once"), p0);
  kf::partition_offset_store store2(again);
  co::pipeline<source_t, order_table<>, co::AtMostOnce<>,
               co::with_store<kf::partition_offset_store>>
      q(again, table, store2, co::settings{.batch_size = 10});
  pump(q, [&] { return store2.load() == co::position{100}; });
  CHECK(table.size() == static_cast<std::size_t>(100 - lost));
}

TEST_CASE(
    "two groups, or two topics, into one SQLite table with one stream never share a position") {
  // Issue 21, items 5 and 12: groups "blue" and "green" feeding one table under one stream and
  // topic claimed the same position rows, and the second went on from the first's positions;
  // a source reading another topic did too. A claim binds the rows to the table and to the
  // source (its topic, and a member's group): another's claim is refused, rolled back.
  using crash_lab::order_event;
  using crash_lab::orders_flat;
  using sink_t = sq::guarded_upsert_sink<orders_flat>;
  using group_t = kf::group_source<order_event, co::TransactionalPosition<>>;
  using assigned_t = kf::assigned_source<order_event, co::TransactionalPosition<>>;
  test_support::scratch_dir dir;
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  mc.create_topic("refunds", 1);
  for (const char* topic : {"orders", "refunds"}) {
    kf::producer<order_event> prod(mc.client_config(), topic);
    for (std::int64_t i = 0; i < 40; ++i)
      prod.send(p0, order_event{1 + i % 7, 100, 1000 + i, 1 + i / 7});
    prod.flush();
  }
  const auto group_options = [&](const std::string& group) {
    return kf::consumer_options{.topic = "orders", .config = mc.group_config(group)};
  };
  // Polls until the claim is refused with E; false if it never is.
  const auto refused = []<class E>(auto& p, std::optional<E>& out) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    try {
      while (std::chrono::steady_clock::now() < deadline)
        (void)p.poll_once();
    } catch (const E& e) {
      out.emplace(e);
    }
    return out.has_value();
  };
  co::epoch blue_epoch{};
  {
    sink_t sink(dir / "db.sqlite");
    group_t blue(group_options("blue"));
    co::pipeline<group_t, sink_t, co::TransactionalPosition<>> p(blue, sink);
    pump(p, [&] { return sink.load_position() == co::position{40}; });
    blue_epoch = sink.owner_epoch();
    blue.close();
  }
  {
    sink_t sink(dir / "db.sqlite");
    group_t green(group_options("green"));
    co::pipeline<group_t, sink_t, co::TransactionalPosition<>> p(green, sink);
    std::optional<co::position_bound_elsewhere> e;
    REQUIRE(refused(p, e));
    INFO(e->what());
    CHECK(e->bound_to() == "'orders_flat', read from kafka topic 'orders', group 'blue'");
    CHECK(e->mine() == "'orders_flat', read from kafka topic 'orders', group 'green'");
    CHECK(sink.owner_epoch() == blue_epoch);  // blue's claim stands, green's was rolled back
    green.close();
  }
  {
    sink_t sink(dir / "db.sqlite");
    assigned_t refunds(options_for(mc, "refunds"), {p0});
    co::pipeline<assigned_t, sink_t, co::TransactionalPosition<>> p(refunds, sink);
    try {
      (void)p.recover();
      FAIL("a source of another topic took the position");
    } catch (const co::position_bound_elsewhere& e) {
      CHECK(e.mine() == "'orders_flat', read from kafka topic 'refunds'");
    }
  }
  // Green with a stream of its own claims a position of its own -- and the table holds blue's
  // rows, newer than it: one table keeps one stream's rows, which the recovery check enforces.
  sink_t sink(dir / "db.sqlite", {.stream = "green"});
  group_t green(group_options("green"));
  co::pipeline<group_t, sink_t, co::TransactionalPosition<>> p(green, sink);
  std::optional<co::invariant_violation> newer;
  CHECK(refused(p, newer));
  green.close();
}

TEST_CASE("AtMostOnce over two partitions: a unit's positions go to Kafka in one request") {
  // Issue 21, item 2: committed one partition at a time, partition 0's commit was accepted,
  // partition 1's refused, and partition 0's records were never written -- lost without a
  // crash. A unit's positions now go in one request, which the coordinator accepts or refuses
  // whole; the refusal says, per partition, what was committed and what that means.
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produced sent;
  using source_t = kf::assigned_source<order, co::AtMostOnce<>>;
  using pipeline_t =
      co::pipeline<source_t, order_table<>, co::AtMostOnce<>, co::with_store<kf::offset_store>>;
  order_table<> table;
  source_t src(options_for(mc, "orders", "at-most-once"), {p0, p1});
  kf::offset_store store(src);
  pipeline_t p(src, table, store, co::settings{.batch_size = 64});
  // The unit must cover both partitions. The first poll starts the pipeline (its seeks drop
  // what was fetched before them) and finds nothing; then the records are produced, and the
  // first unit is read once the consumer holds both partitions' records, so that its batch
  // does not end at a gap between two fetch responses.
  REQUIRE(p.poll_once() == 0);
  REQUIRE(store.requests() == 0);
  produce_orders(mc, "orders", 2, 40, 40, sent);
  {
    const std::unique_ptr<rd_kafka_queue_t, void (*)(rd_kafka_queue_t*)> q(
        rd_kafka_queue_get_consumer(src.handle()), &rd_kafka_queue_destroy);
    REQUIRE(q != nullptr);
    REQUIRE(sent.by_partition.size() == 2);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (rd_kafka_queue_length(q.get()) < 40 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    INFO("queued: " << rd_kafka_queue_length(q.get()));
    REQUIRE(rd_kafka_queue_length(q.get()) >= 40);
  }
  // The first commit request is accepted, the second refused: one unit's two partitions, as the
  // old loop sent them, or two units.
  mc.push_request_errors(kf::api::offset_commit,
                         {RD_KAFKA_RESP_ERR_NO_ERROR, RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION});
  std::size_t first = 0;
  for (int i = 0; i < 200 && first == 0; ++i)
    first = p.poll_once();
  REQUIRE(first > 0);
  REQUIRE(store.load(p0).has_value());  // the unit covered both partitions
  REQUIRE(store.load(p1).has_value());
  CHECK(store.requests() == 1);
  const auto rows_of = [&] {
    std::map<std::int64_t, shared_table<>::row> rows;
    table.for_each([&](const co::memory::stored_row<order>& r) {
      rows[r.row.order_id] = {r.row, r.source_partition, r.source_offset};
    });
    return rows;
  };
  CHECK(table.size() == first);  // committed, then written: nothing lost
  // The next unit's request is refused: in both partitions, and nothing of it is written.
  produce_orders(mc, "orders", 2, 40, 40, sent);
  const std::optional<co::position> before0 = store.load(p0);
  const std::optional<co::position> before1 = store.load(p1);
  const auto rows_before = rows_of();
  try {
    pump(p, [] { return false; });
    FAIL("the refused commit did not stop the pipeline");
  } catch (const kf::commit_refused& e) {
    INFO(e.what());
    CHECK(e.code() == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
    REQUIRE_FALSE(e.outcomes().empty());
    for (const kf::partition_outcome& o : e.outcomes())
      CHECK_FALSE(o.committed());
    CHECK(std::string(e.what()).find("refused (ILLEGAL_GENERATION)") != std::string::npos);
    CHECK(std::string(e.what()).find("read again") != std::string::npos);
    // An assigned source is no group member: a refusal is not a rebalance that passes.
    CHECK(dynamic_cast<const co::commit_interrupted*>(&e) == nullptr);
  }
  CHECK(store.load(p0) == before0);
  CHECK(store.load(p1) == before1);
  CHECK(rows_of().size() == rows_before.size());
  // Read again from the committed offsets: every record written, none lost (each order's
  // row is its last update, from the refused unit).
  const auto at_end = [&] {
    for (const auto& [k, v] : sent.by_partition)
      if (store.load(k) != co::position{static_cast<std::int64_t>(v.size())})
        return false;
    return true;
  };
  pump(p, at_end);
  check_rows_match(rows_of(), sent);
  CHECK(store.requests() <= store.commits());
}

// ---- retention and the end of the log --------------------------------------------------------

TEST_CASE("retention: a stored position behind the earliest retained record is position_lost") {
  kf::mock_cluster mc;
  mc.create_topic("blobs", 1);
  produce_blobs(mc, "blobs", 0, 100);  // 6 MB: the mock keeps 5 MiB per partition
  using source_t = kf::assigned_source<blob, co::TransactionalPosition<>>;
  source_t src(options_for(mc, "blobs"), {p0});
  const co::position earliest = src.earliest(p0);
  REQUIRE(earliest > co::position{0});
  blob_table table;
  // A consumer that must read the whole stream (initial position 0) never starts at earliest.
  co::pipeline<source_t, blob_table, co::TransactionalPosition<>> p(
      src, table, co::settings{.initial_position = co::position{0}});
  try {
    p.recover();
    FAIL("recover() did not throw");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == co::position{0});
    CHECK(e.earliest() == earliest);
  }
  CHECK(table.size() == 0);
}

TEST_CASE("retention: records deleted while the partition is assigned are position_lost at fetch") {
  kf::mock_cluster mc;
  mc.create_topic("blobs", 1);
  produce_blobs(mc, "blobs", 0, 100);
  using source_t = kf::assigned_source<blob, co::TransactionalPosition<>>;
  source_t src(options_for(mc, "blobs"), {p0});
  const co::position first_earliest = src.earliest(p0);
  blob_table table;
  store_position(table, p0, first_earliest);  // valid when the pipeline starts
  co::pipeline<source_t, blob_table, co::TransactionalPosition<>> p(src, table, co::settings{});
  CHECK(p.recover() == first_earliest);
  // Before the first fetch, retention deletes past the position: the fetch is out of range
  // (auto.offset.reset=error) and the source says which records are gone, never jumps.
  produce_blobs(mc, "blobs", 100, 100);
  const co::position now_earliest = src.earliest(p0);
  REQUIRE(now_earliest > first_earliest);
  try {
    pump(
        p, [] { return false; }, 10s);
    FAIL("the fetch did not fail");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == first_earliest);
    CHECK(e.earliest() == now_earliest);
  }
  CHECK(table.size() == 0);
  CHECK(table.load_position(p0) == first_earliest);
}

TEST_CASE("retention and end errors name the partition, at assign and at fetch") {
  // Three partitions, and only partition 2 loses records (issue 21, item 3): the error says
  // which partition, by accessor and in its message.
  kf::mock_cluster mc;
  mc.create_topic("blobs", 3);
  produce_blobs(mc, "blobs", 0, 100, p2);
  using source_t = kf::assigned_source<blob, co::TransactionalPosition<>>;
  const auto names = [](const std::string& message, const char* part) {
    INFO(message);
    return message.find(part) != std::string::npos;
  };
  {  // at assign: the pipeline's recovery
    source_t src(options_for(mc, "blobs"), {p0, p1, p2});
    REQUIRE(src.earliest(p2) > co::position{0});
    blob_table table;
    co::pipeline<source_t, blob_table, co::TransactionalPosition<>> p(
        src, table, co::settings{.initial_position = co::position{0}});
    try {
      p.recover();
      FAIL("recover() did not throw");
    } catch (const co::position_lost& e) {
      CHECK(e.partition() == p2);
      CHECK(e.earliest() == src.earliest(p2));
      CHECK(names(e.what(), "position lost in partition 2"));
    }
  }
  {  // past the end of partition 1 at assign
    source_t src(options_for(mc, "blobs"), {p0, p1, p2});
    blob_table table;
    store_position(table, p1, co::position{7});
    store_position(table, p2, src.earliest(p2));
    co::pipeline<source_t, blob_table, co::TransactionalPosition<>> p(src, table, co::settings{});
    try {
      p.recover();
      FAIL("recover() did not throw");
    } catch (const co::position_beyond_end& e) {
      CHECK(e.partition() == p1);
      CHECK(e.end() == co::position{0});
      CHECK(names(e.what(), "of partition 1 is beyond"));
    }
  }
  {  // at fetch: retention overtakes partition 2 while it is assigned
    source_t src(options_for(mc, "blobs"), {p0, p1, p2});
    const co::position first_earliest = src.earliest(p2);
    blob_table table;
    store_position(table, p2, first_earliest);
    co::pipeline<source_t, blob_table, co::TransactionalPosition<>> p(src, table, co::settings{});
    CHECK(p.recover() == co::position{0});
    produce_blobs(mc, "blobs", 100, 100, p2);
    REQUIRE(src.earliest(p2) > first_earliest);
    try {
      pump(
          p, [] { return false; }, 10s);
      FAIL("the fetch did not fail");
    } catch (const co::position_lost& e) {
      CHECK(e.partition() == p2);
      CHECK(e.stored() == first_earliest);
      CHECK(names(e.what(), "position lost in partition 2"));
    }
  }
}

TEST_CASE("a position past the end of the partition is position_beyond_end, at recovery or fetch") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 10, 10, sent);
  using source_t = kf::assigned_source<order, co::TransactionalPosition<>>;
  {
    source_t src(options_for(mc, "orders"), {p0});
    order_table<> table;
    store_position(table, p0, co::position{50});  // written against another topic, say
    co::pipeline<source_t, order_table<>, co::TransactionalPosition<>> p(src, table,
                                                                         co::settings{});
    try {
      p.recover();
      FAIL("recover() did not throw");
    } catch (const co::position_beyond_end& e) {
      CHECK(e.stored() == co::position{50});
      CHECK(e.end() == co::position{10});
    }
  }
  // The source on its own, sought past the end: the fetch says so.
  source_t src(options_for(mc, "orders"), {p0});
  src.seek(p0, co::position{25});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  try {
    std::size_t read = 0;
    while (std::chrono::steady_clock::now() < deadline)
      read += src.poll(10).size();
    CHECK(read == 0);
    FAIL("the fetch did not fail");
  } catch (const co::position_beyond_end& e) {
    CHECK(e.stored() == co::position{25});
    CHECK(e.end() == co::position{10});
  }
}

// ---- transient and fatal errors --------------------------------------------------------------

TEST_CASE("injected fetch errors are retried without skipping or repeating a record") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produced sent;
  shared_table<> db;
  shared_table<>::session sink(db);
  using source_t = kf::assigned_source<order, co::TransactionalPosition<>>;
  using pipeline_t = co::pipeline<source_t, shared_table<>::session, co::TransactionalPosition<>>;
  source_t src(options_for(mc, "orders"), {p0, p1});
  pipeline_t p(src, sink, co::settings{.batch_size = 32});
  const auto all_read = [&] {
    for (const auto& [k, v] : sent.by_partition)
      if (db.position(k) != co::position{static_cast<std::int64_t>(v.size())})
        return false;
    return true;
  };
  std::size_t unmet = 1;
  const auto errors_met = [&] {
    return rd_kafka_mock_broker_error_stack_cnt(mc.get(), 1, kf::api::fetch, &unmet) ==
               RD_KAFKA_RESP_ERR_NO_ERROR &&
           unmet == 0;
  };
  for (int round = 0; round < 2; ++round) {
    // The broker refuses the next fetches (leaders moved, not available, a timeout) and drops
    // the connection, while new records wait behind them: the client retries every one.
    rd_kafka_mock_broker_push_request_error_rtts(
        mc.get(), 1, kf::api::fetch, 6, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0,
        RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, 0, RD_KAFKA_RESP_ERR__TRANSPORT, 0,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 0, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 0,
        RD_KAFKA_RESP_ERR__TRANSPORT, 0);
    produce_orders(mc, "orders", 2, 300, 50, sent);
    pump(p, [&] { return all_read() && errors_met(); });
    CHECK(unmet == 0);  // every injected error was met
  }
  // Every record applied exactly once, in order, per partition.
  std::map<co::partition_id, std::vector<std::int64_t>> offsets;
  for (const auto& a : db.history())
    offsets[a.partition].push_back(a.at.value());
  for (const auto& [k, v] : sent.by_partition) {
    REQUIRE(offsets[k].size() == v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
      CHECK(offsets[k][i] == static_cast<std::int64_t>(i));
  }
  CHECK(db.absorbed() == 0);
  check_rows_match(db.rows(), sent);
}

TEST_CASE("a partition's fatal fetch error stops the pipeline typed, its position unmoved") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 100, 100, sent);
  shared_table<> db;
  shared_table<>::session sink(db);
  using source_t = kf::assigned_source<order, co::TransactionalPosition<>>;
  source_t src(options_for(mc, "orders"), {p0});
  co::pipeline<source_t, shared_table<>::session, co::TransactionalPosition<>> p(
      src, sink, co::settings{.batch_size = 10});
  pump(p, [&] { return db.position(p0) == co::position{100}; });
  // The broker refuses the next fetches in a way no retry mends: the pipeline stops, naming the
  // partition and librdkafka's error; nothing after the last commit is taken for read. (Several
  // are pushed: the mock may spend one on a fetch it was already holding, whose answer the
  // client never reads.)
  mc.push_request_errors(kf::api::fetch,
                         std::vector<rd_kafka_resp_err_t>(5, RD_KAFKA_RESP_ERR_INVALID_RECORD));
  produce_orders(mc, "orders", 1, 50, 100, sent);
  try {
    pump(
        p, [] { return false; }, 10s);
    FAIL("the fatal fetch error did not stop the pipeline");
  } catch (const kf::partition_failed& e) {
    CHECK(e.partition() == p0);
    CHECK(e.code() == RD_KAFKA_RESP_ERR_INVALID_RECORD);
  }
  CHECK(db.position(p0) == co::position{100});
  mc.clear_request_errors(kf::api::fetch);
  // Once the broker serves it again, the pipeline recovers from its stored position.
  pump(p, [&] { return db.position(p0) == co::position{150}; });
  CHECK(db.history().size() == 150);
  CHECK(db.absorbed() == 0);
}

TEST_CASE("commit errors: transient ones are retried, a refused commit stops the pipeline typed") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 300, 300, sent);  // one event per order: a row per record
  shared_table<co::Replicated> db;
  shared_table<co::Replicated>::session sink(db);
  using source_t = kf::partition_source<order, co::AtLeastOnce<>>;
  using pipeline_t = co::pipeline<source_t, shared_table<co::Replicated>::session,
                                  co::AtLeastOnce<>, co::with_store<kf::partition_offset_store>>;
  source_t src(options_for(mc, "orders", "committers"), p0);
  kf::partition_offset_store store(src);
  pipeline_t p(src, sink, store, co::settings{.batch_size = 50});
  const auto committed = [&] { return store.load().value_or(co::position{0}); };
  pump(p, [&] { return committed() >= co::position{50}; });
  const auto unmet = [&] {
    std::size_t n = 1;
    rd_kafka_mock_broker_error_stack_cnt(mc.get(), 1, kf::api::offset_commit, &n);
    return n;
  };

  // The coordinator is loading, or times out: retried until it answers.
  rd_kafka_mock_broker_push_request_error_rtts(mc.get(), 1, kf::api::offset_commit, 2,
                                               RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS, 0,
                                               RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, 0);
  const co::position before_transient = committed();
  pump(p, [&] { return unmet() == 0 && committed() > before_transient; });

  // The coordinator refuses this member's generation: the unit's rows are written, its position
  // is not, and the pipeline stops with the refusal.
  const co::position before_refusal = committed();
  rd_kafka_mock_broker_push_request_error_rtts(mc.get(), 1, kf::api::offset_commit, 1,
                                               RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION, 0);
  co::position refused_at;
  try {
    pump(p, [] { return false; });
    FAIL("the refused commit did not stop the pipeline");
  } catch (const kf::commit_refused& e) {
    CHECK(e.code() == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
    CHECK(e.partition() == p0);
    refused_at = e.at();
  }
  CHECK(refused_at > before_refusal);
  CHECK(committed() == before_refusal);
  CHECK(db.history().size() == static_cast<std::size_t>(refused_at.value()));
  // The next poll resumes from the committed position: the refused unit is read again, and its
  // replay is absorbed by the offset guard.
  pump(p, [&] { return committed() == co::position{300}; });
  CHECK(db.absorbed() == static_cast<std::size_t>(refused_at - before_refusal));
  CHECK(db.history().size() == 300);
  check_rows_match(db.rows(), sent);
}

TEST_CASE("an undecodable message stops the source before it, after the records before it") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  {
    kf::producer<order> good(mc.client_config(), "orders");
    for (std::int64_t i = 0; i < 5; ++i)
      good.send(p0, order{i + 1, 1, 100});
    good.flush();
    kf::producer<std::int32_t> bad(mc.client_config(), "orders");  // 4 bytes: not an order
    bad.send(p0, 7);
    bad.flush();
    for (std::int64_t i = 0; i < 5; ++i)
      good.send(p0, order{i + 10, 1, 100});
    good.flush();
  }
  order_table<> table;
  using source_t = kf::assigned_source<order, co::TransactionalPosition<>>;
  source_t src(options_for(mc, "orders"), {p0});
  co::pipeline<source_t, order_table<>, co::TransactionalPosition<>> p(src, table, co::settings{});
  pump(p, [&] { return table.size() == 5; });
  for (int attempt = 0; attempt < 2; ++attempt) {  // and again after recovering: never skipped
    try {
      pump(
          p, [] { return false; }, 10s);
      FAIL("the bad message did not stop the source");
    } catch (const kf::undecodable_message& e) {
      CHECK(e.partition() == p0);
      CHECK(e.at() == co::offset{5});
    }
    CHECK(table.load_position(p0) == co::position{5});
  }
}

// ---- the policy is named once --------------------------------------------------------------

// Issue 21, item 6: a source built for AtMostOnce<AutoCommit> (librdkafka's timer commits what
// was polled) or for TransactionalPosition compiled inside an AtLeastOnce pipeline. Rule S27
// refuses it; the source built for the pipeline's own policy is legal.
using alo_store_pipeline = co::with_store<kf::offset_store>;
static_assert(std::is_same_v<co::verdict_t<kf::group_source<order, co::AtMostOnce<co::AutoCommit>>,
                                           shared_table<co::Replicated>::session, co::AtLeastOnce<>,
                                           alo_store_pipeline>,
                             co::rules::source_policy_mismatch>);
static_assert(std::is_same_v<
              co::verdict_t<kf::assigned_source<order, co::TransactionalPosition<>>,
                            order_table<co::Replicated>, co::AtLeastOnce<>, alo_store_pipeline>,
              co::rules::source_policy_mismatch>);
static_assert(co::is_legal_v<kf::assigned_source<order, co::AtLeastOnce<>>,
                             order_table<co::Replicated>, co::AtLeastOnce<>, alo_store_pipeline>);

// ---- the configuration is the library's ------------------------------------------------------

TEST_CASE("configuration contradicting the policy is refused, not overridden") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  // The refusal names the property and comes before anything is created; what agrees with
  // the policy is accepted (an empty answer).
  const auto refused = [&](const kf::properties& extra, auto policy_tag) {
    using policy_t = typename decltype(policy_tag)::type;
    kf::consumer_options o = options_for(mc, "orders");
    for (const auto& [k, v] : extra)
      o.config[k] = v;
    try {
      kf::assigned_source<order, policy_t> src(o, {p0});
    } catch (const kf::configuration_refused& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto at_least_once = std::type_identity<co::AtLeastOnce<>>{};
  const auto transactional = std::type_identity<co::TransactionalPosition<>>{};
  const auto auto_commit = std::type_identity<co::AtMostOnce<co::AutoCommit>>{};
  const auto says = [](const std::string& message, const char* part) {
    INFO(message);
    return message.find(part) != std::string::npos;
  };
  CHECK(says(refused({{"enable.auto.commit", "true"}}, at_least_once),
             "enable.auto.commit=true contradicts the policy AtLeastOnce"));
  CHECK(says(refused({{"enable.auto.commit", "1"}}, transactional),
             "contradicts the policy TransactionalPosition"));
  CHECK(says(refused({{"enable.auto.commit", "false"}}, auto_commit), "it must be true"));
  CHECK(
      says(refused({{"enable.auto.offset.store", "true"}}, at_least_once), "before it is written"));
  CHECK(says(refused({{"auto.offset.reset", "earliest"}}, at_least_once), "position_lost"));
  CHECK(
      says(refused({{"auto.commit.interval.ms", "1000"}}, at_least_once), "does not auto-commit"));
  CHECK(says(refused({{"auto.commit.interval.ms", "1000"}}, auto_commit), "auto_commit_interval"));
  CHECK(says(refused({{"partition.assignment.strategy", "range"}}, at_least_once), "manually"));
  CHECK(says(refused({{"no.such.property", "1"}}, at_least_once), "no.such.property"));
  CHECK(refused({{"enable.auto.commit", "false"}, {"auto.offset.reset", "error"}}, at_least_once)
            .empty());
  CHECK(refused({{"enable.auto.commit", "true"}, {"auto.commit.interval.ms", "5000"}}, auto_commit)
            .empty());
  // A group member needs a group.
  try {
    kf::group_source<order, co::AtLeastOnce<>> src(options_for(mc, "orders"));
    FAIL("a group source without group.id was created");
  } catch (const kf::configuration_refused& e) {
    CHECK(says(e.what(), "needs group.id"));
  }
}

TEST_CASE("a setting the library owns holds under every name, prefix and scope") {
  // librdkafka takes a topic-level property under a "topic." prefix, under its plain name on
  // the global configuration, and legacy aliases besides: each is read back after the user's
  // configuration is applied, and any difference from what the library owns is refused.
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  const auto refused = [&](const kf::properties& extra, auto policy_tag) {
    using policy_t = typename decltype(policy_tag)::type;
    kf::consumer_options o = options_for(mc, "orders");
    for (const auto& [k, v] : extra)
      o.config[k] = v;
    try {
      kf::assigned_source<order, policy_t> src(o, {p0});
    } catch (const kf::configuration_refused& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto says = [](const std::string& message, const char* part) {
    INFO(message);
    return message.find(part) != std::string::npos;
  };
  const auto transactional = std::type_identity<co::TransactionalPosition<>>{};
  const auto at_least_once = std::type_identity<co::AtLeastOnce<>>{};
  const auto auto_commit = std::type_identity<co::AtMostOnce<co::AutoCommit>>{};
  // The reset that skipped retention's victims without position_lost (issue 21, item 1).
  const std::string reset = refused({{"topic.auto.offset.reset", "earliest"}}, transactional);
  CHECK(says(reset, "auto.offset.reset is smallest"));
  CHECK(says(reset, "TransactionalPosition"));
  CHECK(says(reset, "topic.\" prefix"));
  CHECK(says(refused({{"topic.auto.offset.reset", "latest"}}, at_least_once), "AtLeastOnce"));
  CHECK(says(refused({{"topic.auto.offset.reset", "beginning"}}, auto_commit), "error"));
  // Auto-commit and the offset store under their other spellings and scopes.
  CHECK(says(refused({{"topic.enable.auto.commit", "true"}}, at_least_once),
             "topic-level property enable.auto.commit"));
  CHECK(says(refused({{"auto.commit.enable", "true"}}, transactional), "enable.auto.commit"));
  CHECK(says(refused({{"topic.auto.commit.interval.ms", "100"}}, auto_commit),
             "auto.commit.interval.ms"));
  CHECK(says(refused({{"offset.store.method", "none"}}, at_least_once), "offset.store.method"));
  CHECK(
      says(refused({{"topic.offset.store.method", "file"}}, at_least_once), "offset.store.method"));
  // The isolation level: aborted transactions are never records.
  CHECK(says(refused({{"isolation.level", "read_uncommitted"}}, transactional),
             "isolation.level=read_uncommitted is refused under the policy TransactionalPosition"));
  // What agrees with the library is accepted under any spelling.
  CHECK(refused({{"topic.auto.offset.reset", "error"}}, transactional).empty());
  CHECK(refused({{"isolation.level", "read_committed"}}, at_least_once).empty());
  CHECK(refused({{"topic.enable.auto.commit", "true"}}, auto_commit).empty());
}

TEST_CASE("the group generation is read from librdkafka's CGMDv2 metadata, and only from it") {
  const auto bytes = [](std::string_view magic, std::int32_t generation, std::string_view group) {
    std::vector<std::byte> b;
    for (char c : magic)
      b.push_back(static_cast<std::byte>(c));
    const auto* g = reinterpret_cast<const std::byte*>(&generation);
    b.insert(b.end(), g, g + sizeof generation);
    for (char c : group)
      b.push_back(static_cast<std::byte>(c));
    b.push_back(std::byte{0});
    for (char c : std::string_view("member-1"))
      b.push_back(static_cast<std::byte>(c));
    b.push_back(std::byte{0});
    b.push_back(std::byte{1});
    return b;
  };
  CHECK(kf::detail::generation_from_metadata(bytes("CGMDv2:", 7, "g"), "g") == 7);
  CHECK(kf::detail::generation_from_metadata(bytes("CGMDv2:", 123456, "readers"), "readers") ==
        123456);
  CHECK_THROWS_AS(kf::detail::generation_from_metadata(bytes("CGMDv3:", 7, "g"), "g"),
                  kf::unknown_group_metadata);
  CHECK_THROWS_AS(kf::detail::generation_from_metadata(bytes("CGMDv2:", 7, "other"), "g"),
                  kf::unknown_group_metadata);
  const auto short_one = bytes("CGMDv2:", 7, "g");
  CHECK_THROWS_AS(kf::detail::generation_from_metadata(std::span(short_one).first(9), "g"),
                  kf::unknown_group_metadata);
}

// ---- AtMostOnce<AutoCommit>: librdkafka's own timer ----------------------------------------

TEST_CASE("AtMostOnce<AutoCommit> on librdkafka's auto-commit: a polled, unwritten unit is lost") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  {
    kf::producer<order> prod(mc.client_config(), "orders");
    for (std::int64_t i = 0; i < 200; ++i)  // order i + 1 at offset i: a row per record
      prod.send(p0, order{i + 1, 1, 100 + i});
    prod.flush();
  }
  using policy_t = co::AtMostOnce<co::AutoCommit>;
  using source_t = kf::partition_source<order, policy_t>;
  using pipeline_t =
      co::pipeline<source_t, order_table<>, policy_t, co::with_store<kf::partition_offset_store>,
                   co::with_faults<crash_after>>;
  const co::settings settings{.batch_size = 20, .auto_commit_interval = 100ms};
  order_table<> table;
  std::int64_t written = 0;
  co::position polled;
  {
    source_t src(options_for(mc, "orders", "auto"), p0, settings);
    kf::partition_offset_store store(src);
    pipeline_t p(src, table, store, settings);
    std::size_t units = 0;  // the pipeline numbers units from its start
    while (table.size() < 40)
      units += p.poll_once() != 0 ? 1 : 0;
    written = static_cast<std::int64_t>(table.size());
    std::this_thread::sleep_for(150ms);  // the interval passes
    // The next unit's poll: the timer stores the polled position, then the process "dies"
    // before the unit's rows are written.
    p.faults() = crash_after{co::step_kind::poll, units};
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    bool crashed = false;
    while (!crashed && std::chrono::steady_clock::now() < deadline) {
      std::size_t handled = 0;
      try {
        handled = p.poll_once();
      } catch (const co::injected_crash&) {
        crashed = true;
      }
      REQUIRE(handled == 0);  // an empty poll: no unit began, nothing ticked
    }
    REQUIRE(crashed);
    polled = p.read_position();
    REQUIRE(polled > co::position{written});
    CHECK(store.commits() >= 1);
    // Nobody commits synchronously here: librdkafka's own timer commits what was stored.
    const auto commit_deadline = std::chrono::steady_clock::now() + 5s;
    while (store.load() != polled && std::chrono::steady_clock::now() < commit_deadline)
      std::this_thread::sleep_for(20ms);
    CHECK(store.load() == polled);
  }
  CHECK(table.size() == static_cast<std::size_t>(written));
  source_t src(options_for(mc, "orders", "auto"), p0, settings);
  kf::partition_offset_store store(src);
  pipeline_t p(src, table, store, settings);
  const auto lost = polled.value() - written;
  pump(p, [&] { return table.size() == static_cast<std::size_t>(200 - lost); });
  // The records polled and committed but never written are lost, with no error.
  for (std::int64_t id = 1; id <= 200; ++id) {
    const bool present = table.find(id) != nullptr;
    CHECK(present == (id <= written || id > polled.value()));
  }
}

TEST_CASE(
    "lag reports: a sink's committed positions are also committed to Kafka, never read back") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produced sent;
  produce_orders(mc, "orders", 2, 300, 30, sent);
  using source_t = kf::assigned_source<order, co::TransactionalPosition<>>;
  using reported_t = kf::lag_reports<order_table<>>;
  order_table<> table;
  source_t src(options_for(mc, "orders", "reporting"), {p0, p1});
  reported_t reported(table, src);
  co::pipeline<source_t, reported_t, co::TransactionalPosition<>> p(src, reported,
                                                                    co::settings{.batch_size = 40});
  const auto at = [&](co::partition_id k) {
    return co::position{static_cast<std::int64_t>(sent.by_partition[k].size())};
  };
  pump(p, [&] { return table.load_position(p0) == at(p0) && table.load_position(p1) == at(p1); });
  // What lag tools read: the group's committed offsets, reported after each transaction.
  kf::offset_store kafka(src);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((kafka.load(p0) != at(p0) || kafka.load(p1) != at(p1)) &&
         std::chrono::steady_clock::now() < deadline) {
    (void)src.poll(1);  // serves librdkafka's commit results
    std::this_thread::sleep_for(10ms);
  }
  CHECK(kafka.load(p0) == at(p0));
  CHECK(kafka.load(p1) == at(p1));
  CHECK(src.background_commit_failures() == 0);
  // Never read back: a consumer restarted from the sink reads on from the sink's positions,
  // whatever Kafka says.
  {
    source_t rewound(options_for(mc, "orders", "reporting"), {p0, p1});
    kf::offset_store(rewound).commit(p0, co::position{0});
  }
  produce_orders(mc, "orders", 2, 20, 30, sent);
  source_t again(options_for(mc, "orders", "reporting"), {p0, p1});
  reported_t reported_again(table, again);
  co::pipeline<source_t, reported_t, co::TransactionalPosition<>> q(again, reported_again,
                                                                    co::settings{.batch_size = 40});
  CHECK(pump(q, [&] {
          return table.load_position(p0) == at(p0) && table.load_position(p1) == at(p1);
        }) == 20);
}

TEST_CASE("lag reports of a partition_source go to the partition it reads, never to partition 0") {
  // The sink keeps a single-partition pipeline's position as partition 0; Kafka must hear of
  // it as the topic's partition 1, or lag tools (and anything reading the group's offsets)
  // would see partition 0 committed where nothing of it was read.
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produced sent;
  produce_orders(mc, "orders", 2, 200, 30, sent);
  using source_t = kf::partition_source<order, co::TransactionalPosition<>>;
  using reported_t = kf::lag_reports<order_table<>>;
  order_table<> table;
  source_t src(options_for(mc, "orders", "reporting-one"), p1);
  reported_t reported(table, src);
  co::pipeline<source_t, reported_t, co::TransactionalPosition<>> p(src, reported,
                                                                    co::settings{.batch_size = 40});
  const co::position end{static_cast<std::int64_t>(sent.by_partition[p1].size())};
  pump(p, [&] { return table.load_position(co::partition_id{0}) == end; });
  using assigned_t = kf::assigned_source<order, co::AtLeastOnce<>>;
  assigned_t reader(options_for(mc, "orders", "reporting-one"), {p0, p1});
  kf::offset_store kafka(reader);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (kafka.load(p1) != end && std::chrono::steady_clock::now() < deadline) {
    (void)src.poll(1);  // serves librdkafka's commit results
    std::this_thread::sleep_for(10ms);
  }
  CHECK(kafka.load(p1) == end);
  CHECK_FALSE(kafka.load(p0).has_value());
  CHECK(src.background_commit_failures() == 0);
}

TEST_CASE("lag reports reach the group in order: a retried report never lands after a later one") {
  // librdkafka retries an asynchronous commit the coordinator answered "loading" after a
  // backoff, and meanwhile sends the next one: unserialized, the older report lands last and
  // the group shows an older position for good (lag tools would see the partition fall back).
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  using source_t = kf::assigned_source<order, co::AtLeastOnce<>>;
  source_t src(options_for(mc, "orders", "ordered-reports"), {p0, p1});
  kf::offset_store kafka(src);
  kafka.commit(p0, co::position{0});  // the coordinator is known before the reports start
  mc.push_request_errors(kf::api::offset_commit, {RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS});
  const std::array first{co::start_at{p1, co::position{1}}};
  const std::array later{co::start_at{p1, co::position{100}}};
  src.client().commit_async(first);
  src.client().commit_async(later);
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < deadline) {
    (void)src.poll(1);  // serves librdkafka's commit results
    std::this_thread::sleep_for(10ms);
  }
  CHECK(kafka.load(p1) == co::position{100});
  CHECK(src.background_commit_failures() == 0);
}

TEST_CASE("lag reports: a source closed after the last unit leaves the group at the sink's end") {
  // Units end faster than the coordinator answers, so the last reports wait merged behind the
  // one in flight; librdkafka's close purges commits still waiting for the coordinator. The
  // close serves the answers first: a clean shutdown leaves no lag that never drains.
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 300, 30, sent);
  using source_t = kf::assigned_source<order, co::TransactionalPosition<>>;
  using reported_t = kf::lag_reports<order_table<>>;
  order_table<> table;
  const co::position end{static_cast<std::int64_t>(sent.by_partition[p0].size())};
  {
    source_t src(options_for(mc, "orders", "stopping"), {p0});
    reported_t reported(table, src);
    co::pipeline<source_t, reported_t, co::TransactionalPosition<>> p(
        src, reported, co::settings{.batch_size = 10});
    pump(p, [&] { return table.load_position(p0) == end; });
  }  // the application stops: the pipeline and the source go out of scope, no poll between
  using reader_t = kf::assigned_source<order, co::AtLeastOnce<>>;
  reader_t reader(options_for(mc, "orders", "stopping"), {p0});
  CHECK(kf::offset_store(reader).load(p0) == end);

  // The same with two reports and no poll at all between them and the close.
  {
    source_t src(options_for(mc, "orders", "stopping"), {p0});
    const std::array first{co::start_at{p0, co::position{1}}};
    const std::array later{co::start_at{p0, co::position{100}}};
    src.client().commit_async(first);
    src.client().commit_async(later);
  }
  CHECK(kf::offset_store(reader).load(p0) == co::position{100});
}
