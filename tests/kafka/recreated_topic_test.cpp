// SPDX-License-Identifier: BSL-1.0
// A topic deleted and recreated under its name reuses every offset: a position stored for the
// old topic points into the middle of the new one. The sink keeps, beside each partition's
// position, the fingerprint of the record the position follows; a partition resumed there
// reads that record again first, and a different record stops the pipeline (offset_reused)
// instead of silently skipping the new topic's first records. librdkafka's mock cluster has
// no topic deletion: a second mock cluster holding a topic of the same name, read by the same
// group into the same table, is the recreated topic.
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <commit_order/adapters/sqlite.hpp>

#include "support.hpp"
#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

using namespace kafka_test;
namespace sq = commit_order::sqlite;

namespace {

using crash_lab::order_event;
using crash_lab::orders_flat;
using sink_t = sq::guarded_upsert_sink<orders_flat>;
using policy_t = co::TransactionalPosition<>;
using assigned_t = kf::assigned_source<order_event, policy_t>;
using group_t = kf::group_source<order_event, policy_t>;

static_assert(co::fingerprinted_start_source<assigned_t>);
static_assert(co::fingerprinted_start_source<group_t>);
static_assert(co::fingerprinted_start_source<kf::partition_source<order_event, policy_t>>);
static_assert(co::fingerprinting_sink<sink_t>);

const co::partition_id p0{0};
const co::partition_id p1{1};

kf::consumer_options options_for(const kf::mock_cluster& mc, const std::string& group = {}) {
  kf::consumer_options o{.topic = "orders", .config = mc.consumer_config()};
  if (!group.empty()) {
    o.config["group.id"] = group;
    o.config["session.timeout.ms"] = "6000";
    o.config["heartbeat.interval.ms"] = "500";
  }
  return o;
}

/// `n` events to each of partitions 0 and 1; `seed` makes a topic's events its own (a
/// recreated topic holds other orders at the same offsets).
void produce(const kf::mock_cluster& mc, std::int64_t n, std::int64_t seed) {
  kf::producer<order_event> prod(mc.client_config(), "orders");
  for (std::int64_t i = 0; i < n; ++i)
    for (const co::partition_id k : {p0, p1})
      prod.send(k, order_event{seed + 2 * i + k.value(), seed, 1000 + i, 1});
  prod.flush();
}

std::int64_t rows_in(sink_t& sink) {
  auto q = sink.database().prepare("SELECT count(*) FROM orders_flat");
  REQUIRE(q.step());
  return q.column_int64(0);
}

std::optional<std::uint64_t> stored_fingerprint(sink_t& sink, co::partition_id k) {
  auto q = sink.database().prepare(
      "SELECT fingerprint FROM commit_order_positions WHERE \"partition\" = ?1");
  q.bind(1, k.value());
  REQUIRE(q.step());
  if (q.column_is_null(0))
    return std::nullopt;
  return static_cast<std::uint64_t>(q.column_int64(0));
}

/// Polls `p` until it stops with offset_reused (returned) or 20 s pass (none); `applied`
/// counts what it handed out before that.
template <class Pipeline>
std::optional<co::offset_reused> refusal(Pipeline& p, std::size_t* applied = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      const std::size_t n = p.poll_once();
      if (applied != nullptr)
        *applied += n;
    } catch (const co::offset_reused& e) {
      return e;
    }
  }
  return std::nullopt;
}

template <class Pipeline>
std::size_t pump_to(Pipeline& p, sink_t& sink, std::int64_t each) {
  return pump(p, [&] {
    return sink.load_position(p0) == co::position{each} &&
           sink.load_position(p1) == co::position{each};
  });
}

}  // namespace

TEST_CASE("a recreated topic is not read from the old topic's positions (manual assignment)") {
  test_support::scratch_dir dir;
  sink_t sink(dir / "orders.sqlite");
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 2);
    produce(old_cluster, 50, 0);
    assigned_t src(options_for(old_cluster), {p0, p1});
    co::pipeline<assigned_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 16});
    CHECK(pump_to(p, sink, 50) == 100);
    CHECK(stored_fingerprint(sink, p0).has_value());
    CHECK(stored_fingerprint(sink, p1).has_value());
  }
  REQUIRE(rows_in(sink) == 100);

  // The same topic name, 75 other records in each partition: resuming at 50 would skip 50.
  kf::mock_cluster recreated;
  recreated.create_topic("orders", 2);
  produce(recreated, 75, 100000);
  assigned_t src(options_for(recreated), {p0, p1});
  co::pipeline<assigned_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 16});
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Every attempt stops again: the pipeline never reads on past the mismatch.
    try {
      for (int i = 0; i < 50; ++i)
        (void)p.poll_once();
      FAIL("the recreated topic was read from the old positions");
    } catch (const co::offset_reused& e) {
      // Both partitions differ: whichever is fetched first is named.
      const std::string what = e.what();
      CHECK(what.find("kafka topic 'orders'") != std::string::npos);
      CHECK(what.find("partition " + std::to_string(e.partition().value())) != std::string::npos);
      CHECK(what.find("50") != std::string::npos);
      CHECK(what.find("49") != std::string::npos);
      CHECK((e.partition() == p0 || e.partition() == p1));
      CHECK(e.stored() == co::position{50});
      CHECK(e.at() == co::offset{49});
    }
  }
  CHECK(rows_in(sink) == 100);
  CHECK(sink.load_position(p0) == co::position{50});
  CHECK(sink.load_position(p1) == co::position{50});

  // The recovery the error and docs/adapters.md name: the old topic's rows and positions
  // deleted together, the new topic is read whole (removing the positions alone would leave
  // rows newer than them: invariant_violation; and the offset guard would keep the old rows).
  sink.database().exec("DELETE FROM orders_flat; DELETE FROM commit_order_positions");
  assigned_t fresh(options_for(recreated), {p0, p1});
  co::pipeline<assigned_t, sink_t, policy_t> q(fresh, sink, co::settings{.batch_size = 16});
  CHECK(pump_to(q, sink, 75) == 150);
  CHECK(rows_in(sink) == 150);
}

TEST_CASE("a resumed partition reads the record before its position once, and never applies it") {
  test_support::scratch_dir dir;
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produce(mc, 40, 0);
  sink_t sink(dir / "orders.sqlite");
  {
    assigned_t src(options_for(mc), {p0, p1});
    co::pipeline<assigned_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 16});
    CHECK(pump_to(p, sink, 40) == 80);
  }
  produce(mc, 10, 0);  // offsets 40..49: the same orders again (upserts of the same keys)
  const std::uint64_t before = *stored_fingerprint(sink, p0);
  assigned_t src(options_for(mc), {p0, p1});
  co::pipeline<assigned_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 16});
  // Exactly the new records: the one read back for the comparison is not handed out.
  CHECK(pump_to(p, sink, 50) == 20);
  CHECK(stored_fingerprint(sink, p0) != before);  // now the record at offset 49's

  // A position stored without a fingerprint (by an earlier version) resumes without a check.
  sink.database().exec("UPDATE commit_order_positions SET fingerprint = NULL");
  produce(mc, 5, 0);
  assigned_t again(options_for(mc), {p0, p1});
  co::pipeline<assigned_t, sink_t, policy_t> q(again, sink, co::settings{.batch_size = 16});
  CHECK(pump_to(q, sink, 55) == 10);
}

TEST_CASE("a recreated topic is not read from the old topic's positions (consumer group)") {
  test_support::scratch_dir dir;
  sink_t sink(dir / "orders.sqlite");
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 2);
    produce(old_cluster, 30, 0);
    group_t src(options_for(old_cluster, "ledger"));
    co::pipeline<group_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 16});
    CHECK(pump_to(p, sink, 30) == 60);
    src.close();
  }
  kf::mock_cluster recreated;
  recreated.create_topic("orders", 2);
  produce(recreated, 45, 100000);
  group_t src(options_for(recreated, "ledger"));
  co::pipeline<group_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 16});
  std::size_t applied = 0;
  const auto refused = refusal(p, &applied);
  REQUIRE_MESSAGE(refused, "the recreated topic was read from the old positions");
  CHECK(std::string(refused->what()).find("group 'ledger'") != std::string::npos);
  CHECK(refused->stored() == co::position{30});
  CHECK(applied == 0);
  CHECK(rows_in(sink) == 60);
  CHECK(sink.load_position(p0) == co::position{30});
  CHECK(sink.load_position(p1) == co::position{30});
  src.close();
}

TEST_CASE("a recreated topic is not read from the old topic's position (one partition)") {
  using single_t = kf::partition_source<order_event, policy_t>;
  test_support::scratch_dir dir;
  sink_t sink(dir / "orders.sqlite");
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 2);
    produce(old_cluster, 20, 0);
    single_t src(options_for(old_cluster), p1);
    co::pipeline<single_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 8});
    // The sink keeps one position (partition 0 of the pipeline) for the source's partition 1.
    CHECK(pump(p, [&] { return sink.load_position() == co::position{20}; }) == 20);
  }
  kf::mock_cluster recreated;
  recreated.create_topic("orders", 2);
  produce(recreated, 30, 100000);
  single_t src(options_for(recreated), p1);
  co::pipeline<single_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 8});
  const auto refused = refusal(p);
  REQUIRE_MESSAGE(refused, "the recreated topic was read from the old position");
  CHECK(refused->partition() == p1);  // the topic's partition, as the source names it
  CHECK(refused->stored() == co::position{20});
  CHECK(rows_in(sink) == 20);
  CHECK(sink.load_position() == co::position{20});
}

TEST_CASE("a sink wrapped in a forwarding_sink keeps the check (a recreated topic is refused)") {
  // A wrapper that dropped the four-argument store_position would store no fingerprint, and the
  // recreated topic would be read from the old positions without a word.
  using wrapped_t = co::memory::forwarding_sink<sink_t&>;
  static_assert(co::fingerprinting_sink<wrapped_t>);
  test_support::scratch_dir dir;
  sink_t sink(dir / "orders.sqlite");
  wrapped_t wrapped(sink);
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 2);
    produce(old_cluster, 20, 0);
    assigned_t src(options_for(old_cluster), {p0, p1});
    co::pipeline<assigned_t, wrapped_t, policy_t> p(src, wrapped, co::settings{.batch_size = 8});
    CHECK(pump_to(p, sink, 20) == 40);
  }
  REQUIRE(stored_fingerprint(sink, p0).has_value());
  kf::mock_cluster recreated;
  recreated.create_topic("orders", 2);
  produce(recreated, 30, 100000);
  assigned_t src(options_for(recreated), {p0, p1});
  co::pipeline<assigned_t, wrapped_t, policy_t> p(src, wrapped, co::settings{.batch_size = 8});
  const auto refused = refusal(p);
  REQUIRE_MESSAGE(refused, "the recreated topic was read from the old positions");
  CHECK(refused->stored() == co::position{20});
  CHECK(rows_in(sink) == 40);
}

TEST_CASE("a recreated topic is not read from a SQLite position store's positions (AtLeastOnce)") {
  // The positions outside the sink's transaction, in a position store of the same database:
  // the store keeps the fingerprint beside each position as the sink does.
  using al_policy = co::AtLeastOnce<>;
  using al_source = kf::assigned_source<order_event, al_policy>;
  using store_t = sq::position_store<>;
  using al_pipeline = co::pipeline<al_source, sink_t, al_policy, co::with_store<store_t>>;
  static_assert(co::fingerprinting_position_store<store_t>);
  test_support::scratch_dir dir;
  sink_t sink(dir / "orders.sqlite");
  store_t store(sink);
  const auto at = [&](std::int64_t n) {
    return store.load(p0) == co::position{n} && store.load(p1) == co::position{n};
  };
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 2);
    produce(old_cluster, 20, 0);
    al_source src(options_for(old_cluster), {p0, p1});
    al_pipeline p(src, sink, store, co::settings{.batch_size = 8});
    CHECK(pump(p, [&] { return at(20); }) == 40);
    // Resumed on the same topic: exactly the new records (the one compared is not handed out).
    produce(old_cluster, 5, 0);
    al_source again(options_for(old_cluster), {p0, p1});
    al_pipeline q(again, sink, store, co::settings{.batch_size = 8});
    CHECK(pump(q, [&] { return at(25); }) == 10);
  }
  REQUIRE(store.load(p0) == co::position{25});
  REQUIRE(store.loaded_fingerprint().has_value());
  kf::mock_cluster recreated;
  recreated.create_topic("orders", 2);
  produce(recreated, 40, 100000);
  al_source src(options_for(recreated), {p0, p1});
  al_pipeline p(src, sink, store, co::settings{.batch_size = 8});
  const auto refused = refusal(p);
  REQUIRE_MESSAGE(refused, "the recreated topic was read from the old positions");
  CHECK(refused->stored() == co::position{25});
  CHECK(rows_in(sink) == 40);  // the old topic's 40 orders (its last 10 records updated them)
  CHECK(store.load(p0) == co::position{25});
  CHECK(store.load(p1) == co::position{25});
}

// Found by an audit: kafka::lag_reports forwarded neither the four-argument store_position nor
// claimed_fingerprint, so the SQL sink behind it kept no fingerprint and a recreated topic was
// read from the old positions.
TEST_CASE("behind kafka::lag_reports: the fingerprint is kept and a recreated topic refused") {
  using reported_t = kf::lag_reports<sink_t>;
  static_assert(co::fingerprinting_sink<reported_t>);
  static_assert(co::source_bound_sink<reported_t> == co::source_bound_sink<sink_t>);
  test_support::scratch_dir dir;
  sink_t sink(dir / "orders.sqlite");
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 2);
    produce(old_cluster, 20, 0);
    auto o = options_for(old_cluster);
    o.config["group.id"] = "lag";  // lag_reports commits to the group's offsets
    assigned_t src(o, {p0, p1});
    reported_t reported(sink, src);
    co::pipeline<assigned_t, reported_t, policy_t> p(src, reported, co::settings{.batch_size = 8});
    CHECK(pump_to(p, sink, 20) == 40);
  }
  CHECK(stored_fingerprint(sink, p0).has_value());
  kf::mock_cluster recreated;
  recreated.create_topic("orders", 2);
  produce(recreated, 30, 100000);
  auto o = options_for(recreated);
  o.config["group.id"] = "lag";
  assigned_t src(o, {p0, p1});
  reported_t reported(sink, src);
  co::pipeline<assigned_t, reported_t, policy_t> p(src, reported, co::settings{.batch_size = 8});
  std::size_t applied = 0;
  const auto refused = refusal(p, &applied);
  CHECK_MESSAGE(refused,
                "the recreated topic was read from the old positions; applied " << applied);
  CHECK(applied == 0);
  CHECK(rows_in(sink) == 40);
}

TEST_CASE("a second partition_source sharing the first's stream is refused, never read from it") {
  // Two partition_sources of one topic, each its own pipeline, into one database with the
  // default stream: each is its pipeline's partition 0, so they share one position row. The
  // second must not read its partition from the first's position (records 0..19 of partition
  // 1 would be skipped without a word): the record before that position is not the one the
  // position was stored after, and the pipeline stops. (docs/adapters.md: give each its own
  // stream and table.)
  using single_t = kf::partition_source<order_event, policy_t>;
  test_support::scratch_dir dir;
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produce(mc, 20, 0);
  {
    sink_t sink(dir / "orders.sqlite");
    single_t src(options_for(mc), p0);
    co::pipeline<single_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 8});
    CHECK(pump(p, [&] { return rows_in(sink) == 20; }) == 20);
  }
  sink_t sink(dir / "orders.sqlite");
  single_t src(options_for(mc), p1);
  co::pipeline<single_t, sink_t, policy_t> p(src, sink, co::settings{.batch_size = 8});
  std::size_t applied = 0;
  const auto refused = refusal(p, &applied);
  REQUIRE_MESSAGE(refused, "partition 1 was read from partition 0's position");
  CHECK(refused->stored() == co::position{20});
  CHECK(applied == 0);
  CHECK(rows_in(sink) == 20);
  CHECK(sink.load_position() == co::position{20});
}

TEST_CASE("lag reports of a one-partition source go to the topic's partition") {
  // kf::lag_reports commits the sink's positions to the group's offsets, for lag tools: for a
  // partition_source, under the partition the source reads (lag_reports keeps it as single_).
  // With the recreated-topic check on (a fingerprinting sink), the loop stores each position
  // with the four-argument store_position(k, p, e, f), k being the pipeline's partition 0.
  using single_t = kf::partition_source<order_event, policy_t>;
  using reported_t = kf::lag_reports<sink_t>;
  static_assert(co::fingerprinting_sink<reported_t>);
  test_support::scratch_dir dir;
  sink_t sink(dir / "orders.sqlite");
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produce(mc, 20, 0);
  single_t src(options_for(mc, "ledger"), p1);
  reported_t reported(sink, src);
  co::pipeline<single_t, reported_t, policy_t> p(src, reported, co::settings{.batch_size = 8});
  CHECK(pump(p, [&] { return sink.load_position() == co::position{20}; }) == 20);
  single_t other(options_for(mc, "ledger"), p0);
  kf::partition_offset_store of_p0(other);
  kf::partition_offset_store of_p1(src);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (of_p1.load() != co::position{20} && of_p0.load() != co::position{20} &&
         std::chrono::steady_clock::now() < deadline) {
    (void)src.poll(1);  // serves librdkafka's commit results
    std::this_thread::sleep_for(10ms);
  }
  // Partition 1's lag: what the pipeline read. Partition 0 was never read by this group.
  CHECK(of_p1.load().value_or(co::position{-1}) == co::position{20});
  CHECK(of_p0.load().value_or(co::position{-1}) == co::position{-1});
}
