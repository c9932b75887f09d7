// SPDX-License-Identifier: BSL-1.0
// Pipelines over the PostgreSQL sinks and store, against a real server: each policy end to
// end; one shared table fed by four partitions while a consumer group rebalances (members
// joining, leaving, and one expiring without being told: a zombie, fenced, nothing of its unit
// written); and the server itself crashed (pg_ctl stop -m immediate) under a running consumer,
// which recovers with nothing it was told was committed lost.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include <commit_order/adapters/memory.hpp>

#include "pg_orders.hpp"
#include "pg_support.hpp"

using namespace pg_test;

namespace {

using order_log = co::memory::log<order_event, co::Buffered>;

/// `n` events over `orders` orders, each a new event of a random order (event_seq counts per
/// order).
order_log random_orders(std::int64_t n, std::int64_t orders, std::uint64_t seed) {
  order_log log;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick(1, orders);
  std::map<std::int64_t, std::int64_t> seq;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t id = pick(rng);
    log.append(order_event{id, 100 + id, 1000 * id + i, ++seq[id]});
  }
  return log;
}

/// What orders_flat must hold: each order's last event.
std::map<std::int64_t, order_event> last_events(const std::vector<order_event>& events) {
  std::map<std::int64_t, order_event> last;
  for (const auto& e : events)
    last[e.order_id] = e;
  return last;
}

std::vector<order_event> events_of(const order_log& log) {
  std::vector<order_event> out;
  for (const auto& r : log.records())
    out.push_back(r.event);
  return out;
}

/// orders_flat as stored.
std::map<std::int64_t, order_event> table_of(client& c, const std::string& table = "orders_flat") {
  std::map<std::int64_t, order_event> rows;
  const pg::result r = c.exec("SELECT order_id, customer_id, total_cents, event_seq FROM " + table);
  for (int i = 0; i < r.rows(); ++i)
    rows[r.integer(i, 0)] =
        order_event{r.integer(i, 0), r.integer(i, 1), r.integer(i, 2), r.integer(i, 3)};
  return rows;
}

/// A sink that marks the rows it writes (customer_id), so a test can tell whose they are.
template <class Sink>
struct marking final : Sink {
  using Sink::Sink;
  std::int64_t mark = 0;
  void apply(co::partition_id k, co::offset o, const order_event& row) {
    order_event marked = row;
    if (mark != 0)
      marked.customer_id = mark;
    Sink::apply(k, o, marked);
  }
  void apply(co::offset o, const order_event& row) { apply(co::partition_id{0}, o, row); }
};

}  // namespace

// ---- each policy end to end ------------------------------------------------------------------

TEST_CASE("TransactionalPosition writes every order and its position, and resumes where it was") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_tx");
  order_log log = random_orders(1000, 120, 1);
  {
    guarded<> sink(conninfo(), in_schema(schema));
    co::pipeline<order_log, guarded<>, co::TransactionalPosition<>,
                 co::with_observer<co::counting_observer>>
        p(log, sink, co::settings{.batch_size = 64});
    CHECK(p.run() == 1000);
    CHECK(p.observer().units_committed == 16);
    // One statement per unit, and one more wherever a key came again in its statement (120
    // keys over 1000 orders: the rows of a key never share a statement), in one round trip.
    CHECK(sink.stats().key_splits > 0);
    CHECK(sink.stats().write_statements == 16 + sink.stats().key_splits);
    CHECK(sink.stats().rows_sent == 1000);
    CHECK(sink.load_position() == co::position{1000});
  }
  // More events, a new consumer: it claims (a fresh epoch) and goes on from 1000.
  for (std::int64_t i = 0; i < 100; ++i)
    log.append(order_event{i + 1, 0, i, 1000 + i});
  guarded<> sink(conninfo(), in_schema(schema));
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(log, sink,
                                                                    co::settings{.batch_size = 64});
  CHECK(p.recover() == co::position{1000});
  CHECK(p.run() == 100);
  CHECK(sink.owner_epoch() == co::epoch{2});
  client c(conninfo(), schema);
  CHECK(table_of(c) == last_events(events_of(log)));
}

TEST_CASE("a row newer than the stored position is an invariant violation at recovery") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_invariant");
  order_log log = random_orders(100, 10, 2);
  guarded<> sink(conninfo(), in_schema(schema));
  sink.apply(commit_order::partition_id{0}, co::offset{50},
             order_event{1, 1, 1, 1});  // outside any transaction, no position
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(log, sink);
  CHECK_THROWS_AS(p.recover(), co::invariant_violation);
}

namespace {
/// The same events in another table: another consumer's, in the same database.
struct orders_copy final
    : pg::table_layout<"orders_copy", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"customer_id", &order_event::customer_id>,
                                         pg::column<"total_cents", &order_event::total_cents>,
                                         pg::column<"event_seq", &order_event::event_seq>>> {};
}  // namespace

TEST_CASE("two consumers of one database with default options never share a position") {
  // Issue 21, item 12: two pipelines with different tables and sources and one stream and topic
  // (the defaults; here the tests' stream, "orders"): the second started at the first's position
  // and skipped 5 of its 10 records, unseen by the recovery check (its table was empty). A position
  // row is bound to the table it vouches for, and a claim for another table fails, rolled back.
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_bound");
  order_log first_log = random_orders(5, 5, 7);
  {
    guarded<> sink(conninfo(), in_schema(schema));
    co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(first_log, sink);
    CHECK(p.run() == 5);
  }
  using copy_t = pg::guarded_upsert_sink<orders_copy, pg::buffered>;
  order_log second_log = random_orders(10, 10, 8);
  std::string release;
  {
    copy_t sink(conninfo(), in_schema(schema));
    co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
    try {
      (void)p.recover();
      FAIL("the second consumer took the first one's position");
    } catch (const co::position_bound_elsewhere& e) {
      INFO(e.what());
      CHECK(e.bound_to() == "'" + schema + ".orders_flat'");
      CHECK(e.mine() == "'" + schema + ".orders_copy'");
      release = e.release();
    }
    CHECK(sink.owner_epoch() == co::epoch{1});  // rolled back: the first still owns it
    CHECK(sink.load_position() == co::position{5});
  }
  {
    pg::sink_options own = in_schema(schema);
    own.stream = "copier";
    copy_t sink(conninfo(), own);
    co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
    CHECK(p.run() == 10);
  }
  {
    guarded<> sink(conninfo(), in_schema(schema));
    co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(first_log, sink);
    CHECK(p.recover() == co::position{5});
  }
  // The operator's statement unbinds it; the table it would move to holds newer rows (the
  // copier's), which the recovery check refuses in turn.
  REQUIRE_FALSE(release.empty());
  client(conninfo()).exec(release);
  copy_t sink(conninfo(), in_schema(schema));
  co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
  CHECK_THROWS_AS(p.recover(), co::invariant_violation);
}

TEST_CASE("a position table written before positions were bound gains the binding column") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_unbound");
  client(conninfo(), schema)
      .exec(
          "CREATE TABLE commit_order_positions (stream TEXT NOT NULL, topic TEXT NOT NULL,"
          " \"partition\" INTEGER NOT NULL, position BIGINT, owner_epoch BIGINT NOT NULL"
          " DEFAULT 0, PRIMARY KEY (stream, topic, \"partition\"));"
          " INSERT INTO commit_order_positions VALUES ('orders', 'default', 0, 3, 1)");
  // Without create_tables the sink does not change the layout: it says what to run.
  pg::sink_options keep = in_schema(schema);
  keep.create_tables = false;
  CHECK_THROWS_WITH_AS(guarded<>(conninfo(), keep), doctest::Contains("ADD COLUMN bound_to TEXT"),
                       co::error);
  guarded<> sink(conninfo(), in_schema(schema));
  sink.begin();
  CHECK(sink.claim(commit_order::partition_id{0}, co::epoch{2}) ==
        co::position{3});  // the old row: bound by its claim
  sink.commit();
  pg::guarded_upsert_sink<orders_copy, pg::buffered> other(conninfo(), in_schema(schema));
  other.begin();
  CHECK_THROWS_AS(other.claim(co::partition_id{0}, co::epoch{3}), co::position_bound_elsewhere);
  other.rollback();
  CHECK(sink.owner_epoch() == co::epoch{2});
}

TEST_CASE("a PostgreSQL position keeps the fingerprint of the record it follows") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_fingerprint");
  // A table of the layout before fingerprints: without create_tables the sink says what to run.
  client(conninfo(), schema)
      .exec(
          "CREATE TABLE commit_order_positions (stream TEXT NOT NULL, topic TEXT NOT NULL,"
          " \"partition\" INTEGER NOT NULL, position BIGINT, owner_epoch BIGINT NOT NULL"
          " DEFAULT 0, bound_to TEXT, PRIMARY KEY (stream, topic, \"partition\"));"
          " INSERT INTO commit_order_positions VALUES ('orders', 'default', 1, 3, 1, NULL)");
  pg::sink_options keep = in_schema(schema);
  keep.create_tables = false;
  CHECK_THROWS_WITH_AS(guarded<>(conninfo(), keep),
                       doctest::Contains("ADD COLUMN fingerprint BIGINT"), co::error);
  static_assert(co::fingerprinting_sink<guarded<>>);
  const co::partition_id k{1};
  guarded<> sink(conninfo(), in_schema(schema));
  sink.begin();
  CHECK(sink.claim(k, co::epoch{2}) == co::position{3});
  CHECK_FALSE(sink.claimed_fingerprint().has_value());  // the old row: stored without one
  // The whole 64 bits survive the signed column, the top bit set or not.
  sink.store_position(k, co::position{9}, co::epoch{2}, 0xfedcba9876543210ULL);
  sink.commit();
  sink.begin();
  CHECK(sink.claim(k, co::epoch{3}) == co::position{9});
  CHECK(sink.claimed_fingerprint() == 0xfedcba9876543210ULL);
  // A position stored without one keeps none: the old one is not the record before it.
  sink.store_position(k, co::position{12}, co::epoch{3});
  sink.commit();
  sink.begin();
  const co::claimed c = sink.claim_next(k);
  CHECK(c.stored == co::position{12});
  CHECK_FALSE(sink.claimed_fingerprint().has_value());
  sink.store_position(k, co::position{13}, c.owner, 42);
  sink.commit();
  sink.begin();
  CHECK(sink.claim_next(k).stored == co::position{13});
  CHECK(sink.claimed_fingerprint() == 42U);
  sink.rollback();
  // A writer that moves the position and knows nothing of fingerprints (an earlier version of
  // this library in a rolling upgrade, a position store) leaves one that is not the record
  // before the new position: it is not returned, so it cannot fail a healthy start.
  client(conninfo(), schema).exec("UPDATE commit_order_positions SET position = 20");
  sink.begin();
  CHECK(sink.claim_next(k).stored == co::position{20});
  CHECK_FALSE(sink.claimed_fingerprint().has_value());
  sink.rollback();
}

TEST_CASE("a PostgreSQL position store keeps the fingerprint of the record a position follows") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_store_fingerprint");
  using store_t = pg::position_store<pg::buffered>;
  static_assert(co::fingerprinting_position_store<store_t>);
  const co::partition_id k{1};
  pg::store_options o;
  o.stream = "fingerprints";
  o.schema = schema;
  store_t store(conninfo(), o);
  CHECK_FALSE(store.load(k).has_value());
  CHECK_FALSE(store.loaded_fingerprint().has_value());
  store.commit(k, co::position{9}, 0xfedcba9876543210ULL);
  CHECK(store.load(k) == co::position{9});
  CHECK(store.loaded_fingerprint() == 0xfedcba9876543210ULL);
  store.commit(k, co::position{12});  // without one: none, not the old one
  CHECK(store.load(k) == co::position{12});
  CHECK_FALSE(store.loaded_fingerprint().has_value());
  store.commit(k, co::position{13}, 42);
  // A writer that moves the position and keeps no fingerprint (an earlier version): none.
  client(conninfo(), schema).exec("UPDATE commit_order_positions SET position = 20");
  CHECK(store.load(k) == co::position{20});
  CHECK_FALSE(store.loaded_fingerprint().has_value());
}

TEST_CASE("a PostgreSQL position store that vouches for nothing must name its consumer") {
  // A sink of the user's own names no table and a memory log no source: two such consumers of
  // one database with default store options would share one row.
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_store_unbound");
  using store_t = pg::position_store<pg::buffered>;
  using own_table = co::memory::table<order_event, co::key<&order_event::order_id>,
                                      co::capabilities<co::Idempotent, co::Buffered>>;
  using pipeline_t = co::pipeline<order_log, own_table, co::AtLeastOnce<>, co::with_store<store_t>>;
  pg::store_options so;
  so.schema = schema;
  order_log log = random_orders(10, 10, 13);
  own_table table;
  {
    store_t store(conninfo(), so);
    try {
      pipeline_t p(log, table, store);
      FAIL("a store bound to nothing kept the default stream");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("store_options::stream") != std::string::npos);
    }
  }
  so.stream = "audit";
  store_t store(conninfo(), so);
  pipeline_t p(log, table, store);
  CHECK(p.run() == 10);
  CHECK(store.load() == co::position{10});
}

TEST_CASE("two sinks' tables of one name in two databases never share a store's position") {
  // The binding named schema and table, not the database: two consumers writing
  // public.orders_flat into two databases, with their positions in a third (default options),
  // shared one row, and the second applied none of its records.
  using store_t = pg::position_store<pg::buffered>;
  const std::string suffix = std::to_string(::getpid());
  const std::string a = "co_bound_a_" + suffix, b = "co_bound_b_" + suffix;
  for (const std::string& db : {a, b}) {
    pg_test::client(conninfo()).exec("DROP DATABASE IF EXISTS " + db);
    pg_test::client(conninfo()).exec("CREATE DATABASE " + db);
  }
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_store_databases");
  pg::store_options so;
  so.schema = schema;
  {
    order_log log = random_orders(10, 10, 21);
    guarded<> sink(conninfo() + " dbname=" + a);
    store_t store(conninfo(), so);
    co::pipeline<order_log, guarded<>, co::AtLeastOnce<>, co::with_store<store_t>> p(log, sink,
                                                                                     store);
    CHECK(p.run() == 10);
  }
  {
    order_log log = random_orders(10, 10, 22);
    guarded<> sink(conninfo() + " dbname=" + b);
    store_t store(conninfo(), so);
    co::pipeline<order_log, guarded<>, co::AtLeastOnce<>, co::with_store<store_t>> p(log, sink,
                                                                                     store);
    try {
      (void)p.recover();
      FAIL("the consumer of database b took database a's position");
    } catch (const co::position_bound_elsewhere& e) {
      INFO(e.what());
      CHECK(e.bound_to().find("in database '" + a + "'") != std::string::npos);
      CHECK(e.mine().find("in database '" + b + "'") != std::string::npos);
    }
  }
  for (const std::string& db : {a, b})
    pg_test::client(conninfo()).exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
}

TEST_CASE("two AtLeastOnce consumers with default store options never share a position") {
  // Two consumers of one database, each its own source and table, each with a position store
  // left at its defaults: the second started at the first's position and wrote none of its
  // records. The pipeline binds a store's rows to the sink's table, like a sink's own; a sink's
  // claim then refuses a store's row of another table too.
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_store_bound");
  using store_t = pg::position_store<pg::buffered>;
  using copy_t = pg::guarded_upsert_sink<orders_copy, pg::buffered>;
  pg::store_options so;
  so.schema = schema;
  order_log first_log = random_orders(10, 10, 11);
  {
    guarded<> sink(conninfo(), in_schema(schema, "default"));
    store_t store(conninfo(), so);
    co::pipeline<order_log, guarded<>, co::AtLeastOnce<>, co::with_store<store_t>> p(first_log,
                                                                                     sink, store);
    CHECK(p.run() == 10);
  }
  order_log second_log = random_orders(10, 10, 12);
  {
    copy_t sink(conninfo(), in_schema(schema, "default"));
    store_t store(conninfo(), so);
    co::pipeline<order_log, copy_t, co::AtLeastOnce<>, co::with_store<store_t>> p(second_log, sink,
                                                                                  store);
    try {
      (void)p.recover();
      FAIL("the second consumer took the first one's position");
    } catch (const co::position_bound_elsewhere& e) {
      INFO(e.what());
      CHECK(e.bound_to() == "'" + schema + ".orders_flat'");
      CHECK(e.mine() == "'" + schema + ".orders_copy'");
      CHECK(std::string(e.what()).find("store_options::stream") != std::string::npos);
    }
    // A commit is refused as well, and changes nothing (two consumers started together).
    CHECK_THROWS_AS(store.commit(commit_order::partition_id{0}, co::position{3}),
                    co::position_bound_elsewhere);
  }
  {
    copy_t sink(conninfo(), in_schema(schema, "default"));
    co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
    CHECK_THROWS_AS(p.recover(), co::position_bound_elsewhere);
  }
  CHECK(store_t(conninfo(), so).load() == co::position{10});
  {
    pg::store_options own = so;
    own.stream = "copier";
    copy_t sink(conninfo(), in_schema(schema, "copier"));
    store_t store(conninfo(), own);
    co::pipeline<order_log, copy_t, co::AtLeastOnce<>, co::with_store<store_t>> p(second_log, sink,
                                                                                  store);
    CHECK(p.run() == 10);
  }
  // The first consumer moving its position into its sink's transaction keeps it.
  guarded<> sink(conninfo(), in_schema(schema, "default"));
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(first_log, sink);
  CHECK(p.recover() == co::position{10});
}

TEST_CASE("AtLeastOnce and AtMostOnce keep their position in the PostgreSQL store") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_store");
  order_log log = random_orders(600, 50, 3);
  pg::store_options so;
  so.schema = schema;
  so.stream = "at_least_once";
  pg::position_store<pg::buffered> store(conninfo(), so);
  {
    guarded<> sink(conninfo(), in_schema(schema, "at_least_once"));
    co::pipeline<order_log, guarded<>, co::AtLeastOnce<>,
                 co::with_store<pg::position_store<pg::buffered>>>
        p(log, sink, store, co::settings{.batch_size = 50});
    CHECK(p.run() == 600);
  }
  CHECK(store.load() == co::position{600});
  CHECK(store.commits() == 12);
  client c(conninfo(), schema);
  CHECK(table_of(c) == last_events(events_of(log)));

  so.stream = "at_most_once";
  pg::position_store<pg::buffered> store2(conninfo(), so);
  appending<> append(conninfo(), in_schema(schema, "at_most_once"));
  co::pipeline<order_log, appending<>, co::AtMostOnce<>,
               co::with_store<pg::position_store<pg::buffered>>>
      p(log, append, store2, co::settings{.batch_size = 50});
  CHECK(p.run() == 600);
  CHECK(store2.load() == co::position{600});
  CHECK(c.count("orders_log") == 600);
  // The store refuses to overwrite a position a fencing owner claimed (a sink of the table the
  // position vouches for: a sink of another table is refused the claim, below).
  appending<> owner(conninfo(), in_schema(schema, "at_most_once"));
  owner.begin();
  owner.claim(commit_order::partition_id{0}, co::epoch{5});
  owner.commit();
  CHECK_THROWS_AS(store2.commit(commit_order::partition_id{0}, co::position{601}), co::fenced);
}

// ---- one table, four partitions, a group that rebalances -------------------------------------

TEST_CASE("a shared table fed by four partitions through rebalances, and a fenced zombie") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_group");
  using plog = co::memory::partitioned_log<order_event, co::Buffered>;
  using group = co::memory::group<order_event, co::Buffered>;
  using sink_t = marking<guarded<>>;
  using pipeline_t = co::pipeline<group::member_consumer, sink_t, co::TransactionalPosition<>>;
  plog log(4);
  std::map<std::int64_t, std::int64_t> seq;
  std::vector<order_event> all;
  std::mt19937_64 rng(4);
  const auto produce = [&](int n) {
    std::uniform_int_distribution<std::int64_t> pick(1, 300);
    for (int i = 0; i < n; ++i) {
      const std::int64_t id = pick(rng);
      const order_event e{id, 100 + id, static_cast<std::int64_t>(all.size()), ++seq[id]};
      // Keyed partitioning: an order always goes to the same partition.
      log.append(co::partition_id{static_cast<std::int32_t>(id % 4)}, e);
      all.push_back(e);
    }
  };
  produce(800);
  group g(log);
  const co::settings settings{.batch_size = 40};

  struct member {
    group::member_id id;
    group::member_consumer consumer;
    sink_t sink;
    pipeline_t pipeline;
    member(group& g, group::member_id m, const std::string& schema, const co::settings& s)
        : id(m)
        , consumer(g.consumer_of(m))
        , sink(conninfo(), in_schema(schema))
        , pipeline(consumer, sink, s) {}
  };
  const auto join = [&] { return std::make_unique<member>(g, g.join(), schema, settings); };
  std::vector<std::unique_ptr<member>> members;
  members.push_back(join());
  members[0]->pipeline.poll_once();
  members[0]->pipeline.poll_once();
  members.push_back(join());  // generation 2: partitions split between two
  for (int round = 0; round < 3; ++round)
    for (auto& m : members)
      m->pipeline.poll_once();
  produce(400);
  members.push_back(join());  // generation 3: three members
  for (int round = 0; round < 3; ++round)
    for (auto& m : members)
      m->pipeline.poll_once();

  // The third member's session expires without it knowing: a zombie with the partitions and
  // the epoch it had. The others take its partitions over (a new generation, a higher epoch).
  member& zombie = *members[2];
  const auto zombie_parts = zombie.consumer.assignment();
  REQUIRE_FALSE(zombie_parts.empty());
  g.expire(zombie.id);
  produce(200);
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 2; ++i)
      members[static_cast<std::size_t>(i)]->pipeline.poll_once();
  // The zombie goes on with its old assignment: its next unit is fenced, none of it written.
  zombie.sink.mark = -777;
  try {
    zombie.pipeline.poll_once();
    FAIL("the zombie's unit must be fenced");
  } catch (const co::fenced& e) {
    CHECK(e.mine() < e.current());
    CHECK(std::ranges::find(zombie_parts, e.partition()) != zombie_parts.end());
  }
  members.pop_back();

  // The first member leaves in good order; the second drains everything.
  g.leave(members[0]->id);
  members[0]->pipeline.poll_once();
  produce(100);
  while (members[1]->pipeline.poll_once() != 0) {
  }
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat WHERE customer_id = -777") == 0);
  CHECK(table_of(c) == last_events(all));
  // Every row sits in its order's partition; every partition's position is at its end, owned
  // at the last generation's epoch.
  CHECK(c.count("orders_flat WHERE source_partition <> order_id % 4") == 0);
  for (std::int32_t k = 0; k < 4; ++k) {
    const co::partition_id part{k};
    CHECK(members[1]->sink.load_position(part) == log.end(part));
    CHECK(members[1]->sink.owner_epoch(part) == co::epoch::of(0, g.generation()));
  }
  CHECK(c.integer("SELECT partition_count FROM commit_order_streams") == 4);
}

// ---- the server crashes under a running consumer ---------------------------------------------

namespace {

// Consumes `log` through `make_pipeline()`'s pipeline, riding out infrastructure errors (the
// server is down, restarting, or just came back): each poll after one recovers from what the
// server kept. `acknowledged` is the committed position after each poll that returned.
template <class Pipeline>
void consume_through_crashes(Pipeline& p, const order_log& log,
                             std::atomic<std::int64_t>& acknowledged, std::atomic<int>& errors) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      const std::size_t n = p.poll_once();
      acknowledged = p.committed_position().value();
      if (n == 0 && p.committed_position() == log.end())
        return;
      // Per-record work, so the crashes land in the middle of the run.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    } catch (const co::infrastructure_error&) {
      ++errors;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

template <class Pipeline, class Check>
void crash_server_under(crash_lab::pg_server& server, const order_log& log, Pipeline& p,
                        Check&& stored_position, int crashes) {
  std::atomic<std::int64_t> acknowledged{0};
  std::atomic<int> errors{0};
  std::thread consumer([&] { consume_through_crashes(p, log, acknowledged, errors); });
  const auto wait_for_progress = [&](std::int64_t beyond) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (acknowledged.load() <= beyond && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  for (int i = 0; i < crashes; ++i) {
    wait_for_progress(acknowledged.load() + 40);
    server.crash();
    // Everything acknowledged by now was committed before the server died.
    const std::int64_t before = acknowledged.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    server.restart();
    // Whatever the consumer was told was committed survived the crash (positions only move
    // forward, so reading it now cannot hide a loss).
    const std::int64_t stored = stored_position();
    INFO("crash " << i + 1 << ": acknowledged " << before << ", stored after restart " << stored);
    CHECK(stored >= before);
  }
  consumer.join();
  CHECK(errors.load() >= crashes);  // each crash was seen, and ridden out
  CHECK(acknowledged.load() == log.end().value());
}

}  // namespace

TEST_CASE("the server crashes four times under TransactionalPosition: nothing committed is lost") {
  crash_lab::pg_server server;  // its own server: the crashes must not hit the other tests
  order_log log = random_orders(3000, 200, 5);
  guarded<> sink(server.conninfo(), in_schema("crash"));
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(log, sink,
                                                                    co::settings{.batch_size = 16});
  crash_server_under(
      server, log, p,
      [&] {
        client c(server.conninfo(), "crash");
        return c.integer("SELECT position FROM commit_order_positions").value_or(0);
      },
      4);
  client c(server.conninfo(), "crash");
  CHECK(table_of(c) == last_events(events_of(log)));
  CHECK(c.integer("SELECT position FROM commit_order_positions") == 3000);
}

TEST_CASE("the server crashes three times under AtLeastOnce: nothing committed is lost") {
  crash_lab::pg_server server;
  order_log log = random_orders(3000, 200, 6);
  guarded<> sink(server.conninfo(), in_schema("crash"));
  pg::store_options so;
  so.schema = "crash";
  pg::position_store<pg::buffered> store(server.conninfo(), so);
  co::pipeline<order_log, guarded<>, co::AtLeastOnce<>,
               co::with_store<pg::position_store<pg::buffered>>>
      p(log, sink, store, co::settings{.batch_size = 16});
  crash_server_under(
      server, log, p,
      [&] {
        client c(server.conninfo(), "crash");
        return c.integer("SELECT position FROM commit_order_positions").value_or(0);
      },
      3);
  client c(server.conninfo(), "crash");
  CHECK(table_of(c) == last_events(events_of(log)));
}

// ---- what the rules make of the PostgreSQL sinks ------------------------------------------

namespace {
using plog = co::memory::partitioned_log<order_event, co::Buffered>;
using pconsumer = plog::consumer;
using pgroup = co::memory::group<order_event, co::Buffered>;
using store_t = pg::position_store<pg::buffered>;
}  // namespace

// The same judgements as for the SQLite sinks, plus the partitioned ones: a partitioned source
// needs rows that carry their partition (PartitionScoped) or a version guard (R17), a group
// needs a fencing sink (R18), positions are per partition (R19).
static_assert(co::can_make_pipeline<pconsumer, guarded<>, co::TransactionalPosition<>>);
static_assert(
    co::can_make_pipeline<pgroup::member_consumer, guarded<>, co::TransactionalPosition<>>);
static_assert(
    co::can_make_pipeline<pgroup::member_consumer, versioned<>, co::TransactionalPosition<>>);
static_assert(
    co::can_make_pipeline<pconsumer, guarded<>, co::AtLeastOnce<>, co::with_store<store_t>>);
static_assert(
    co::can_make_pipeline<pconsumer, appending<>, co::AtMostOnce<>, co::with_store<store_t>>);
static_assert(!co::can_make_pipeline<pconsumer, upserting<>, co::TransactionalPosition<>>);  // R5
static_assert(
    !co::can_make_pipeline<pconsumer, appending<>, co::AtLeastOnce<>, co::with_store<store_t>>);
// A Synced store beside a Buffered sink: a position could outlive the rows (R9a).
static_assert(!co::can_make_pipeline<order_log, guarded<pg::buffered>, co::AtLeastOnce<>,
                                     co::with_store<pg::position_store<pg::synced>>>);
static_assert(co::partitioned_fencing_sink<guarded<>> && !co::fencing_sink<guarded<>>);
static_assert(co::stream_registry<guarded<>> && co::partitioned_watermarked_sink<guarded<>>);
static_assert(co::partitioned_position_store<store_t> && !co::position_store<store_t>);

TEST_CASE("a repartitioned key: the offset guard refuses it, the version guard takes it") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_repartition");
  plog log(2);
  // Order 1 lives in partition 0 for three events, then -- the topic repartitioned -- in
  // partition 1 for two more; order 2 stays in partition 0.
  log.append(co::partition_id{0}, order_event{1, 101, 10, 1});
  log.append(co::partition_id{0}, order_event{2, 102, 20, 1});
  log.append(co::partition_id{0}, order_event{1, 101, 11, 2});
  log.append(co::partition_id{0}, order_event{1, 101, 12, 3});
  log.append(co::partition_id{1}, order_event{1, 101, 13, 4});
  log.append(co::partition_id{1}, order_event{1, 101, 14, 5});
  const std::vector<co::partition_id> both{co::partition_id{0}, co::partition_id{1}};
  {
    auto source = log.make_consumer(both);
    guarded<> sink(conninfo(), in_schema(schema, "offset_guard"));
    co::pipeline<pconsumer, guarded<>, co::TransactionalPosition<>> p(
        source, sink, co::settings{.batch_size = 2});
    CHECK_THROWS_AS(p.run(), co::key_moved_partition);
  }
  client c(conninfo(), schema);
  c.exec("DROP TABLE orders_flat");
  auto source = log.make_consumer(both);
  versioned<> sink(conninfo(), in_schema(schema, "version_guard"));
  co::pipeline<pconsumer, versioned<>, co::TransactionalPosition<>> p(
      source, sink, co::settings{.batch_size = 2});
  CHECK(p.run() == 6);
  CHECK(c.integer("SELECT event_seq FROM orders_flat WHERE order_id = 1") == 5);
  CHECK(c.integer("SELECT source_partition FROM orders_flat WHERE order_id = 1") == 1);
  CHECK(c.integer("SELECT event_seq FROM orders_flat WHERE order_id = 2") == 1);
}

TEST_CASE("the version guard survives a repartition: a new partition count is recorded") {
  // Orders 0..5, first over 2 partitions (order i in partition i % 2); then the topic gets a
  // third partition and every order's second event hashes anew (partition i % 3). The old
  // partitions keep their records and offsets, as a broker's do. Until this test, the
  // PostgreSQL sink refused the new count under the version guard too, stopping a consumer
  // that docs/adapters.md says survives repartitioning.
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_repartition_count");
  plog before(2);
  plog after(3);
  for (std::int64_t id = 0; id < 6; ++id) {
    const auto old_partition = co::partition_id{static_cast<std::int32_t>(id % 2)};
    before.append(old_partition, order_event{id, 100 + id, id * 10 + 1, 1});
    after.append(old_partition, order_event{id, 100 + id, id * 10 + 1, 1});
  }
  for (std::int64_t id = 0; id < 6; ++id)
    after.append(co::partition_id{static_cast<std::int32_t>(id % 3)},
                 order_event{id, 100 + id, id * 10 + 2, 2});

  const auto consume = [&]<class Sink>(Sink& sink) {
    using pipeline_t = co::pipeline<pconsumer, Sink, co::TransactionalPosition<>>;
    {
      auto source = before.make_consumer({co::partition_id{0}, co::partition_id{1}});
      pipeline_t p(source, sink, co::settings{.batch_size = 4});
      CHECK(p.run() == 6);
    }
    CHECK(sink.partition_count() == 2);
    auto source =
        after.make_consumer({co::partition_id{0}, co::partition_id{1}, co::partition_id{2}});
    pipeline_t p(source, sink, co::settings{.batch_size = 4});
    return p.run();
  };

  versioned<> sink(conninfo(), in_schema(schema, "version_guard"));
  CHECK(consume(sink) == 6);
  CHECK(sink.partition_count() == 3);
  client c(conninfo(), schema);
  const auto rows = table_of(c);
  REQUIRE(rows.size() == 6);
  for (const auto& [id, row] : rows)
    CHECK(row.event_seq == 2);
  // The partition-scoped offset guard cannot compare the moved keys' offsets: refused at claim.
  c.exec("DROP TABLE orders_flat");
  guarded<> refused(conninfo(), in_schema(schema, "offset_guard"));
  CHECK_THROWS_AS(consume(refused), co::partition_count_changed);
}

TEST_CASE("the operator accepts a new partition count by naming it, outside a transaction") {
  const std::string schema = fresh_schema(conninfo(), "t_pipeline_accept_count");
  guarded<> sink(conninfo(), in_schema(schema, "offset_guard"));
  // Naming the count before any claim records it: a claim that sees another one fails.
  sink.accept_partition_count(3);
  CHECK(sink.partition_count() == 3);
  sink.begin();
  CHECK_THROWS_AS(sink.check_partition_count(4), co::partition_count_changed);
  sink.rollback();
  sink.begin();
  CHECK_NOTHROW(sink.check_partition_count(3));
  CHECK_THROWS_AS(sink.accept_partition_count(4), std::logic_error);
  sink.commit();
  sink.accept_partition_count();
  CHECK(sink.partition_count() == std::nullopt);
  sink.accept_partition_count(4);
  sink.begin();
  CHECK_NOTHROW(sink.check_partition_count(4));
  sink.commit();
  CHECK(sink.partition_count() == 4);
}
