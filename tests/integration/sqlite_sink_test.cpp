// SPDX-License-Identifier: BSL-1.0
// The SQLite sinks and position store against real database files.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace co = commit_order;
namespace sq = commit_order::sqlite;
using crash_lab::order_event;
using crash_lab::orders_flat;
using test_support::scratch_dir;

using guarded_t = sq::guarded_upsert_sink<orders_flat>;
using upsert_t = sq::upsert_sink<orders_flat>;
using append_t = sq::append_sink<orders_flat>;

// ---- what each sink declares ---------------------------------------------------------------

static_assert(co::has_capability_v<guarded_t, co::Idempotent> &&
              co::has_capability_v<guarded_t, co::OffsetGuarded> &&
              co::has_capability_v<guarded_t, co::Transactional>);
static_assert(co::has_capability_v<upsert_t, co::Idempotent> &&
              !co::has_capability_v<upsert_t, co::OffsetGuarded>);
static_assert(!co::has_capability_v<append_t, co::Idempotent> &&
              !co::has_capability_v<append_t, co::OffsetGuarded> &&
              co::has_capability_v<append_t, co::Transactional>);
static_assert(std::is_same_v<co::durability_t<guarded_t>, co::Synced>);
static_assert(std::is_same_v<co::durability_t<sq::guarded_upsert_sink<orders_flat, sq::wal_normal>>,
                             co::Buffered>);
static_assert(std::is_same_v<co::sink_key_t<guarded_t>, co::key<&order_event::order_id>>);
static_assert(std::is_same_v<co::sink_key_t<append_t>, co::no_key>);
static_assert(co::partitioned_fencing_sink<guarded_t> &&
              co::partitioned_watermarked_sink<guarded_t>);
static_assert(std::is_same_v<co::durability_t<sq::position_store<>>, co::Synced>);

namespace {

order_event order(std::int64_t id, std::int64_t total, std::int64_t seq) {
  return order_event{id, 100 + id, total, seq};
}

struct row {
  order_event event;
  std::int64_t source_offset;
  friend bool operator==(const row&, const row&) = default;
};

std::vector<row> rows_of(sq::connection& db) {
  auto q = db.prepare(
      "SELECT order_id, customer_id, total_cents, event_seq, source_offset FROM orders_flat "
      "ORDER BY order_id, rowid");
  std::vector<row> out;
  while (q.step())
    out.push_back(
        row{order_event{q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)},
            q.column_int64(4)});
  return out;
}

std::int64_t count_rows(sq::connection& db, const std::string& table) {
  auto q = db.prepare("SELECT COUNT(*) FROM " + table);
  return q.step() ? q.column_int64(0) : -1;
}

}  // namespace

TEST_CASE("the guarded upsert absorbs a replayed or older record and keeps the newer row") {
  scratch_dir dir;
  guarded_t sink(dir / "db.sqlite");
  CHECK(sink.applied_watermark() == std::nullopt);
  CHECK(sink.apply(co::partition_id{0}, co::offset{5}, order(1, 500, 2)) ==
        co::write_outcome::applied);
  CHECK(sink.apply(co::partition_id{0}, co::offset{3}, order(1, 300, 1)) ==
        co::write_outcome::absorbed);
  CHECK(sink.apply(co::partition_id{0}, co::offset{5}, order(1, 500, 2)) ==
        co::write_outcome::absorbed);
  CHECK(rows_of(sink.database()) == std::vector<row>{{order(1, 500, 2), 5}});
  CHECK(sink.apply(co::partition_id{0}, co::offset{9}, order(1, 900, 3)) ==
        co::write_outcome::applied);
  CHECK(sink.apply(co::partition_id{0}, co::offset{4}, order(2, 40, 1)) ==
        co::write_outcome::applied);
  CHECK(rows_of(sink.database()) == std::vector<row>{{order(1, 900, 3), 9}, {order(2, 40, 1), 4}});
  CHECK(sink.applied_watermark() == co::offset{9});
  // One statement, prepared once, served every write.
  CHECK(sink.write_statement().runs() == 5);
}

TEST_CASE("without the guard a replayed older record overwrites newer data (why R5 exists)") {
  scratch_dir dir;
  upsert_t sink(dir / "db.sqlite");
  CHECK(sink.apply(co::partition_id{0}, co::offset{5}, order(1, 500, 2)) ==
        co::write_outcome::applied);
  CHECK(sink.apply(co::partition_id{0}, co::offset{3}, order(1, 300, 1)) ==
        co::write_outcome::applied);
  CHECK(rows_of(sink.database()) == std::vector<row>{{order(1, 300, 1), 3}});
}

TEST_CASE("the append sink stores a replay as a second row (why R3 exists)") {
  scratch_dir dir;
  append_t sink(dir / "db.sqlite");
  sink.apply(co::partition_id{0}, co::offset{5}, order(1, 500, 2));
  sink.apply(co::partition_id{0}, co::offset{5}, order(1, 500, 2));
  CHECK(rows_of(sink.database()).size() == 2);
}

TEST_CASE("rollback leaves the table and the position as they were") {
  scratch_dir dir;
  guarded_t sink(dir / "db.sqlite");
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, order(1, 100, 1));
  sink.store_position(co::partition_id{0}, co::position{1});
  sink.commit();
  const auto before = rows_of(sink.database());

  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{1}, order(1, 150, 2));
  sink.apply(co::partition_id{0}, co::offset{2}, order(2, 200, 1));
  sink.store_position(co::partition_id{0}, co::position{3});
  sink.rollback();

  CHECK(rows_of(sink.database()) == before);
  CHECK(sink.load_position() == co::position{1});
  CHECK(sink.applied_watermark() == co::offset{0});
  // What a second connection (another process) sees agrees.
  guarded_t other(dir / "db.sqlite");
  CHECK(rows_of(other.database()) == before);
  CHECK(other.load_position() == co::position{1});
}

TEST_CASE("a write failing mid-batch under TransactionalPosition rolls the batch back") {
  scratch_dir dir;
  // Fails on one record, as a constraint violation or a full disk would.
  struct failing_sink : guarded_t {
    using guarded_t::guarded_t;
    std::int64_t fail_at = -1;
    co::write_outcome apply(co::offset o, const order_event& e) {
      if (o.value() == fail_at)
        throw std::runtime_error("write failed");
      return guarded_t::apply(co::partition_id{0}, o, e);
    }
  };
  co::memory::log<order_event, co::Synced> log;
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(order(i % 3, i, i / 3 + 1));
  failing_sink sink(dir / "db.sqlite");
  co::pipeline<co::memory::log<order_event, co::Synced>, failing_sink, co::TransactionalPosition<>>
      p(log, sink, co::settings{.batch_size = 5});
  CHECK(p.poll_once() == 5);
  const auto after_first = rows_of(sink.database());
  sink.fail_at = 7;
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{7});
    CHECK(e.committed() == co::position{5});
    CHECK_THROWS_WITH(std::rethrow_if_nested(e), "write failed");
  }
  CHECK(rows_of(sink.database()) == after_first);
  CHECK(sink.load_position() == co::position{5});
  CHECK(sink.applied_watermark() == co::offset{4});
}

TEST_CASE("fencing: a stale owner on the same database file is fenced and writes nothing") {
  scratch_dir dir;
  co::memory::log<order_event, co::Synced> log;
  for (std::int64_t i = 0; i < 20; ++i)
    log.append(order(i % 4, i * 10, i / 4 + 1));
  using reader_t = co::memory::log<order_event, co::Synced>::reader;
  using pipeline_t = co::pipeline<reader_t, guarded_t, co::TransactionalPosition<>>;
  const sq::sink_options options{.stream = "orders"};

  // Two consumers of one partition over time, each with its own connection and cursor; the
  // group hands out epochs (a generation id): the later owner holds the higher one.
  guarded_t zombie(dir / "db.sqlite", options);
  auto zombie_reader = log.make_reader();
  pipeline_t old_owner(zombie_reader, zombie,
                       co::settings{.batch_size = 4, .owner_epoch = co::epoch{1}});
  CHECK(old_owner.recover() == co::position{0});  // claims the stream at epoch 1
  CHECK(old_owner.poll_once() == 4);
  CHECK(zombie.load_position() == co::position{4});

  // A rebalance: the new owner's recovery claims the stream at epoch 2 and resumes at 4.
  guarded_t owner(dir / "db.sqlite", options);
  auto owner_reader = log.make_reader();
  pipeline_t new_owner(owner_reader, owner,
                       co::settings{.batch_size = 4, .owner_epoch = co::epoch{2}});
  CHECK(new_owner.recover() == co::position{4});
  CHECK(owner.owner_epoch() == co::epoch{2});
  const auto rows_at_takeover = rows_of(owner.database());

  // The zombie does not know yet: its next batch is fenced and rolled back, rows included.
  try {
    old_owner.poll_once();
    FAIL("a stale owner committed");
  } catch (const co::fenced& e) {
    CHECK(e.mine() == co::epoch{1});
    CHECK(e.current() == co::epoch{2});
  }
  CHECK(rows_of(owner.database()) == rows_at_takeover);
  CHECK(owner.load_position() == co::position{4});

  // Nor can it come back by recovering at its old epoch.
  CHECK_THROWS_AS(old_owner.recover(), co::fenced);

  // The owner finishes the stream.
  CHECK(new_owner.run() == 16);
  CHECK(owner.load_position() == co::position{20});
  CHECK(owner.applied_watermark() == co::offset{19});
  // Re-claiming at one's own epoch (a restart of the same owner) is allowed.
  pipeline_t restarted(owner_reader, owner,
                       co::settings{.batch_size = 4, .owner_epoch = co::epoch{2}});
  CHECK(restarted.recover() == co::position{20});
}

TEST_CASE("store_position with an explicit epoch only succeeds for the current owner") {
  scratch_dir dir;
  guarded_t a(dir / "db.sqlite");
  a.begin();
  a.claim(co::partition_id{0}, co::epoch{3});
  a.store_position(co::partition_id{0}, co::position{7}, co::epoch{3});
  CHECK_THROWS_AS(a.store_position(co::partition_id{0}, co::position{8}, co::epoch{2}), co::fenced);
  a.commit();
  CHECK(a.load_position() == co::position{7});
  CHECK_THROWS_AS(a.store_position(co::partition_id{0}, co::position{9}),
                  std::logic_error);  // outside a transaction
  CHECK(a.claimed_epoch() == co::epoch{3});
}

TEST_CASE("a claim rolled back is no claim") {
  scratch_dir dir;
  guarded_t a(dir / "db.sqlite");
  a.begin();
  a.claim(co::partition_id{0}, co::epoch{1});
  a.commit();
  a.begin();
  a.claim(co::partition_id{0}, co::epoch{5});
  a.rollback();
  CHECK(a.claimed_epoch() == co::epoch{1});
  CHECK(a.owner_epoch() == co::epoch{1});
  // Its positions are still written as the owner the row names.
  a.begin();
  a.store_position(co::partition_id{0}, co::position{3});
  a.commit();
  CHECK(a.load_position() == co::position{3});
}

namespace {
/// A second table of the same events: another consumer's, in the same database.
struct orders_copy final
    : sq::table_layout<"orders_copy", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"customer_id", &order_event::customer_id>,
                                         sq::column<"total_cents", &order_event::total_cents>,
                                         sq::column<"event_seq", &order_event::event_seq>>> {};
using order_log = co::memory::log<order_event, co::Synced>;
order_log orders(std::int64_t n) {
  order_log log;
  for (std::int64_t i = 0; i < n; ++i)
    log.append(order(i + 1, 10 * i, 1));
  return log;
}
}  // namespace

TEST_CASE("two consumers of one database with default options never share a position") {
  // Issue 21, item 12: two pipelines with different tables and sources, both with the default
  // stream and topic: the second started at the first's position and skipped 5 of its 10
  // records. A position row is bound to the table it vouches for; another table's claim fails.
  scratch_dir dir;
  order_log first_log = orders(5);
  {
    guarded_t sink(dir / "db.sqlite");
    co::pipeline<order_log, guarded_t, co::TransactionalPosition<>> p(first_log, sink);
    CHECK(p.run() == 5);
  }
  order_log second_log = orders(10);
  using copy_t = sq::guarded_upsert_sink<orders_copy>;
  std::string release;
  {
    copy_t sink(dir / "db.sqlite");
    co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
    try {
      (void)p.recover();
      FAIL("the second consumer took the first one's position");
    } catch (const co::position_bound_elsewhere& e) {
      INFO(e.what());
      CHECK(e.bound_to() == "'orders_flat'");
      CHECK(e.mine() == "'orders_copy'");
      CHECK(e.partition() == co::partition_id{0});
      CHECK(std::string(e.what()).find("sink_options::stream") != std::string::npos);
      release = e.release();
    }
    // The claim was rolled back: the first consumer still owns its position.
    CHECK(sink.owner_epoch() == co::epoch{1});
    CHECK(sink.load_position() == co::position{5});
  }
  // With a stream of its own, the second consumer reads all ten.
  {
    copy_t sink(dir / "db.sqlite", {.stream = "copier"});
    co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
    CHECK(p.run() == 10);
  }
  // The first goes on as it was, and an operator's release moves a position on purpose.
  {
    guarded_t sink(dir / "db.sqlite");
    co::pipeline<order_log, guarded_t, co::TransactionalPosition<>> p(first_log, sink);
    CHECK(p.recover() == co::position{5});
  }
  REQUIRE_FALSE(release.empty());
  {
    sq::connection db = sq::connection::open_keeping_journal(dir / "db.sqlite");
    db.exec(release);
  }
  // Released, the position is no longer refused for its table -- but orders_copy holds rows
  // newer than it (the copier's), and the recovery check refuses those in turn.
  copy_t sink(dir / "db.sqlite");
  co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
  CHECK_THROWS_AS(p.recover(), co::invariant_violation);
}

TEST_CASE("two AtLeastOnce consumers with default store options never share a position") {
  // Two consumers of one database, each its own source and table, each with a position store
  // left at its defaults (stream "default", topic ""): the second started at the first's
  // position and wrote none of its records. The pipeline binds a store's rows to the sink's
  // table (and the source, where it names itself), like a sink's own.
  using store_t = sq::position_store<>;
  using copy_t = sq::guarded_upsert_sink<orders_copy>;
  scratch_dir dir;
  order_log first_log = orders(10);
  {
    guarded_t sink(dir / "db.sqlite");
    store_t store(dir / "db.sqlite");  // its own connection: told the table by the pipeline
    co::pipeline<order_log, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> p(first_log,
                                                                                     sink, store);
    CHECK(p.run() == 10);
  }
  order_log second_log = orders(10);
  {
    copy_t sink(dir / "db.sqlite");
    store_t store(dir / "db.sqlite");
    co::pipeline<order_log, copy_t, co::AtLeastOnce<>, co::with_store<store_t>> p(second_log, sink,
                                                                                  store);
    try {
      (void)p.recover();
      FAIL("the second consumer took the first one's position");
    } catch (const co::position_bound_elsewhere& e) {
      INFO(e.what());
      CHECK(e.bound_to() == "'orders_flat'");
      CHECK(e.mine() == "'orders_copy'");
      CHECK(std::string(e.what()).find("store_options::stream") != std::string::npos);
    }
  }
  // A store made from the sink is bound to its table from the start, without a pipeline.
  {
    copy_t sink(dir / "db.sqlite");
    store_t store(sink);
    CHECK_THROWS_AS((void)store.load(), co::position_bound_elsewhere);
    CHECK_THROWS_AS(store.commit(co::partition_id{0}, co::position{3}),
                    co::position_bound_elsewhere);
  }
  // Neither changed the first consumer's position; with a stream of its own the second reads
  // all ten.
  CHECK(store_t(dir / "db.sqlite").load() == co::position{10});
  {
    copy_t sink(dir / "db.sqlite");
    store_t store(dir / "db.sqlite", {.stream = "copier"});
    co::pipeline<order_log, copy_t, co::AtLeastOnce<>, co::with_store<store_t>> p(second_log, sink,
                                                                                  store);
    CHECK(p.run() == 10);
    CHECK(count_rows(sink.database(), "orders_copy") == 10);
  }
}

TEST_CASE("two consumers starting together: the second is refused before it writes") {
  // Both loaded no position; the first committed; the second's commit would have overwritten it
  // (and the first would then resume from the second's position), and its rows were written
  // before that commit was refused. A bound store reserves its row at its first read: the
  // second is refused there, before any row.
  using store_t = sq::position_store<>;
  using copy_t = sq::guarded_upsert_sink<orders_copy>;
  scratch_dir dir;
  order_log first_log = orders(6);
  order_log second_log = orders(4);
  guarded_t first_sink(dir / "db.sqlite");
  store_t first_store(dir / "db.sqlite");
  copy_t second_sink(dir / "db.sqlite");
  store_t second_store(dir / "db.sqlite");
  co::pipeline<order_log, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> first(
      first_log, first_sink, first_store);
  co::pipeline<order_log, copy_t, co::AtLeastOnce<>, co::with_store<store_t>> second(
      second_log, second_sink, second_store);
  CHECK(first.recover() == co::position{0});
  CHECK_THROWS_AS(second.recover(), co::position_bound_elsewhere);
  CHECK(first.run() == 6);
  CHECK_THROWS_AS(second.run(), co::position_bound_elsewhere);
  CHECK(count_rows(second_sink.database(), "orders_copy") == 0);
  CHECK(store_t(dir / "db.sqlite").load() == co::position{6});
}

TEST_CASE("a position store that vouches for nothing must name its consumer") {
  // A sink of the user's own names no table and a memory log no source: two such consumers of
  // one database with default store options shared one row, silently, in either order.
  using store_t = sq::position_store<>;
  using own_table = co::memory::table<order_event, co::key<&order_event::order_id>,
                                      co::capabilities<co::Idempotent, co::Synced>>;
  using pipeline_t = co::pipeline<order_log, own_table, co::AtLeastOnce<>, co::with_store<store_t>>;
  scratch_dir dir;
  order_log log = orders(10);
  own_table table;
  {
    store_t store(dir / "db.sqlite");
    try {
      pipeline_t p(log, table, store);
      FAIL("a store bound to nothing kept the default stream");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      CHECK(what.find("store_options::stream") != std::string::npos);
      CHECK(what.find("would share its position") != std::string::npos);
    }
  }
  // Named, it runs; a second consumer that names itself apart keeps a position of its own.
  {
    store_t store(dir / "db.sqlite", {.stream = "audit"});
    pipeline_t p(log, table, store);
    CHECK(p.run() == 10);
  }
  order_log other = orders(4);
  own_table other_table;
  store_t store(dir / "db.sqlite", {.stream = "audit-copy"});
  pipeline_t p(other, other_table, store);
  CHECK(p.run() == 4);
  CHECK(store_t(dir / "db.sqlite", {.stream = "audit"}).load() == co::position{10});
}

TEST_CASE("a sink's claim does not adopt a position store's row of another table") {
  // The first consumer keeps its position in a store (AtLeastOnce), the second in its sink
  // (TransactionalPosition), both with the default stream: the claim adopted the store's row,
  // and the second consumer skipped every record the first had read.
  using store_t = sq::position_store<>;
  using copy_t = sq::guarded_upsert_sink<orders_copy>;
  scratch_dir dir;
  order_log first_log = orders(10);
  {
    guarded_t sink(dir / "db.sqlite");
    store_t store(sink);
    co::pipeline<order_log, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> p(first_log,
                                                                                     sink, store);
    CHECK(p.run() == 10);
  }
  order_log second_log = orders(10);
  {
    copy_t sink(dir / "db.sqlite");
    co::pipeline<order_log, copy_t, co::TransactionalPosition<>> p(second_log, sink);
    CHECK_THROWS_AS(p.recover(), co::position_bound_elsewhere);
  }
  // The same consumer moving its position into the sink's transaction keeps it: the store's
  // binding and the sink's name the same table.
  guarded_t sink(dir / "db.sqlite");
  co::pipeline<order_log, guarded_t, co::TransactionalPosition<>> p(first_log, sink);
  CHECK(p.recover() == co::position{10});
}

namespace {
/// A user's decorator of a SQLite sink (it counts writes): it names no table of its own.
template <class Inner>
struct counting_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::Synced, co::Idempotent>;
  using key_type = co::key<&order_event::order_id>;
  Inner* inner;
  std::size_t writes = 0;
  co::write_outcome apply(co::offset o, const order_event& r) {
    ++writes;
    return inner->apply(co::partition_id{0}, o, r);
  }
};
}  // namespace

TEST_CASE("a store made from a sink keeps its binding under a pipeline over a wrapper") {
  // The pipeline told the store what its (wrapping) sink names -- nothing -- and the store
  // forgot the table it was made from: it took the other consumer's position and applied none.
  using store_t = sq::position_store<>;
  using copy_t = sq::guarded_upsert_sink<orders_copy>;
  scratch_dir dir;
  order_log first_log = orders(10);
  {
    guarded_t sink(dir / "db.sqlite");
    store_t store(sink);
    co::pipeline<order_log, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> p(first_log,
                                                                                     sink, store);
    CHECK(p.run() == 10);
  }
  order_log second_log = orders(10);
  copy_t inner(dir / "db.sqlite");
  store_t store(inner);
  counting_sink<copy_t> sink{&inner};
  co::pipeline<order_log, counting_sink<copy_t>, co::AtLeastOnce<>, co::with_store<store_t>> p(
      second_log, sink, store);
  CHECK_THROWS_AS(p.run(), co::position_bound_elsewhere);
  CHECK(sink.writes == 0);
  CHECK(count_rows(inner.database(), "orders_copy") == 0);
}

TEST_CASE("a store and a sink's claim started together: the first to read the row owns it") {
  // The store's consumer recovered first; the other consumer's sink then claimed the row for
  // its table (TransactionalPosition): the store's commit was refused as `fenced` -- a newer
  // copy of the same consumer, with advice to bump the era -- after its rows were written. The
  // store's first read reserves the row for its table: the claim is refused instead, before
  // anything is written, and the store's consumer runs on.
  using store_t = sq::position_store<>;
  using copy_t = sq::guarded_upsert_sink<orders_copy>;
  scratch_dir dir;
  order_log a_log = orders(6);
  order_log b_log = orders(4);
  guarded_t a_sink(dir / "db.sqlite");
  copy_t b_sink(dir / "db.sqlite");
  store_t b_store(dir / "db.sqlite");
  co::pipeline<order_log, guarded_t, co::TransactionalPosition<>> a(a_log, a_sink);
  co::pipeline<order_log, copy_t, co::AtLeastOnce<>, co::with_store<store_t>> b(b_log, b_sink,
                                                                                b_store);
  CHECK(b.recover() == co::position{0});
  try {
    (void)a.recover();
    FAIL("the claim took a row another consumer's store had read");
  } catch (const co::position_bound_elsewhere& e) {
    CHECK(e.bound_to() == "'orders_copy'");
    CHECK(e.mine() == "'orders_flat'");
  }
  CHECK(b.run() == 4);
  CHECK(b_store.load() == co::position{4});
  CHECK(count_rows(a_sink.database(), "orders_flat") == 0);
}

TEST_CASE("two file logs into one table with default options never share a position") {
  // Only the Kafka source named itself: two logs into one table bound their positions to the
  // table alone, and the second consumer started at the first's position, skipping its own.
  using flog = co::file::log<order_event>;
  using store_t = sq::position_store<>;
  scratch_dir dir;
  {
    flog a(dir / "log_a");
    flog b(dir / "log_b");
    for (std::int64_t i = 0; i < 10; ++i) {
      a.append(order(i + 1, 10 * i, 1));
      b.append(order(i + 101, 10 * i, 1));
    }
  }
  {
    flog a(dir / "log_a");
    guarded_t sink(dir / "db.sqlite");
    store_t store(dir / "db.sqlite");
    co::pipeline<flog, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> p(a, sink, store);
    CHECK(p.run() == 10);
  }
  flog b(dir / "log_b");
  {
    guarded_t sink(dir / "db.sqlite");
    store_t store(dir / "db.sqlite");
    co::pipeline<flog, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> p(b, sink, store);
    try {
      (void)p.recover();
      FAIL("the consumer of log_b took log_a's position");
    } catch (const co::position_bound_elsewhere& e) {
      CHECK(e.bound_to().find("log_a") != std::string::npos);
      CHECK(e.mine().find("log_b") != std::string::npos);
    }
  }
  {
    // The sink's own claim (TransactionalPosition) is bound the same way.
    guarded_t sink(dir / "db.sqlite");
    co::pipeline<flog, guarded_t, co::TransactionalPosition<>> p(b, sink);
    CHECK_THROWS_AS(p.recover(), co::position_bound_elsewhere);
  }
  guarded_t sink(dir / "db.sqlite");
  CHECK(count_rows(sink.database(), "orders_flat") == 10);
}

TEST_CASE("a position bound to its table alone is its consumer's once the source is named") {
  // A row written before the source had an identity names the table only: the consumer that
  // now names its source too keeps that position.
  using flog = co::file::log<order_event>;
  scratch_dir dir;
  {
    flog a(dir / "log");
    for (std::int64_t i = 0; i < 10; ++i)
      a.append(order(i + 1, 10 * i, 1));
  }
  {
    guarded_t sink(dir / "db.sqlite");
    sink.begin();
    const co::claimed c = sink.claim_next(co::partition_id{0});
    sink.store_position(co::partition_id{0}, co::position{6}, c.owner);
    sink.commit();
    auto q = sink.database().prepare("SELECT bound_to FROM commit_order_positions");
    REQUIRE(q.step());
    CHECK(q.column_text(0) == "'orders_flat'");
  }
  flog a(dir / "log");
  guarded_t sink(dir / "db.sqlite");
  co::pipeline<flog, guarded_t, co::TransactionalPosition<>> p(a, sink);
  CHECK(p.recover() == co::position{6});
  CHECK(p.run() == 4);
}

TEST_CASE("two sinks' tables of one name in two files never share a store's position") {
  // The binding named the table and not its file: two consumers writing orders_flat into
  // a.sqlite and b.sqlite, with their positions in one positions file (default options), shared
  // one row, and the second applied none of its records.
  using store_t = sq::position_store<>;
  scratch_dir dir;
  order_log first_log = orders(10);
  {
    guarded_t sink(dir / "a.sqlite");
    store_t store(dir / "positions.sqlite");
    co::pipeline<order_log, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> p(first_log,
                                                                                     sink, store);
    CHECK(p.run() == 10);
  }
  order_log second_log = orders(10);
  guarded_t sink(dir / "b.sqlite");
  store_t store(dir / "positions.sqlite");
  co::pipeline<order_log, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> p(second_log, sink,
                                                                                   store);
  try {
    (void)p.recover();
    FAIL("the consumer of b.sqlite took a.sqlite's position");
  } catch (const co::position_bound_elsewhere& e) {
    INFO(e.what());
    CHECK(e.bound_to().find("a.sqlite") != std::string::npos);
    CHECK(e.mine().find("b.sqlite") != std::string::npos);
    CHECK(e.mine().rfind("'orders_flat' in database '", 0) == 0);
  }
  CHECK(count_rows(sink.database(), "orders_flat") == 0);
  // A store in the sink's own file binds the table alone, as the sink's claims do.
  guarded_t same(dir / "c.sqlite");
  store_t beside(dir / "c.sqlite");
  co::pipeline<order_log, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>> q(second_log, same,
                                                                                   beside);
  CHECK(q.run() == 10);
  auto row = beside.database().prepare("SELECT bound_to FROM commit_order_positions");
  REQUIRE(row.step());
  CHECK(row.column_text(0) == "'orders_flat'");
}

TEST_CASE("a position table written before positions were bound gains the binding column") {
  scratch_dir dir;
  {
    sq::connection db = sq::connection::open_keeping_journal(dir / "db.sqlite");
    db.exec(
        "CREATE TABLE commit_order_positions (stream TEXT NOT NULL, topic TEXT NOT NULL,"
        " \"partition\" INTEGER NOT NULL, position INTEGER, owner_epoch INTEGER NOT NULL DEFAULT"
        " 0, PRIMARY KEY (stream, topic, \"partition\"));"
        " INSERT INTO commit_order_positions VALUES ('default', '', 0, 3, 1)");
  }
  // Without create_tables the sink does not change the layout: it says what to run.
  CHECK_THROWS_WITH_AS(guarded_t(dir / "db.sqlite", {.create_tables = false}),
                       doctest::Contains("ADD COLUMN bound_to TEXT"), co::error);
  guarded_t sink(dir / "db.sqlite");
  sink.begin();
  CHECK(sink.claim(co::partition_id{0}, co::epoch{2}) ==
        co::position{3});  // the old row: bound by its claim
  sink.commit();
  using copy_t = sq::guarded_upsert_sink<orders_copy>;
  copy_t other(dir / "db.sqlite");
  other.begin();
  CHECK_THROWS_AS(other.claim(co::partition_id{0}, co::epoch{3}), co::position_bound_elsewhere);
  other.rollback();
  CHECK(sink.owner_epoch() == co::epoch{2});
}

TEST_CASE("a SQLite position keeps the fingerprint of the record it follows") {
  scratch_dir dir;
  {
    // The layout before fingerprints.
    sq::connection db = sq::connection::open_keeping_journal(dir / "db.sqlite");
    db.exec(
        "CREATE TABLE commit_order_positions (stream TEXT NOT NULL, topic TEXT NOT NULL,"
        " \"partition\" INTEGER NOT NULL, position INTEGER, owner_epoch INTEGER NOT NULL DEFAULT"
        " 0, bound_to TEXT, PRIMARY KEY (stream, topic, \"partition\"));"
        " INSERT INTO commit_order_positions VALUES ('default', '', 1, 3, 1, NULL)");
  }
  CHECK_THROWS_WITH_AS(guarded_t(dir / "db.sqlite", {.create_tables = false}),
                       doctest::Contains("ADD COLUMN fingerprint INTEGER"), co::error);
  static_assert(co::fingerprinting_sink<guarded_t>);
  const co::partition_id k{1};
  guarded_t sink(dir / "db.sqlite");
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
  sink.database().exec("UPDATE commit_order_positions SET position = 20");
  sink.begin();
  CHECK(sink.claim_next(k).stored == co::position{20});
  CHECK_FALSE(sink.claimed_fingerprint().has_value());
  sink.rollback();
}

TEST_CASE("a SQLite position store keeps the fingerprint of the record a position follows") {
  scratch_dir dir;
  static_assert(co::fingerprinting_position_store<sq::position_store<>>);
  const co::partition_id k{1};
  sq::position_store<> store(dir / "db.sqlite", {.stream = "fingerprints"});
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
  store.database().exec("UPDATE commit_order_positions SET position = 20");
  CHECK(store.load(k) == co::position{20});
  CHECK_FALSE(store.loaded_fingerprint().has_value());

  // A refused commit of a bound store leaves the last load's fingerprint as it was (as
  // PostgreSQL's store does): the row is read again only to say why it was refused.
  store.bind_to("orders_flat", "orders-topic");
  store.commit(k, co::position{21}, 7);
  CHECK(store.load(k) == co::position{21});
  store.database().exec(
      "UPDATE commit_order_positions SET owner_epoch = 3, fingerprint = 8,"
      " fingerprint_position = position");
  CHECK_THROWS_AS(store.commit(k, co::position{22}, 9), co::fenced);
  CHECK(store.loaded_fingerprint() == 7);
}

TEST_CASE("the SQLite position store commits durably and respects an owner's claim") {
  scratch_dir dir;
  {
    sq::position_store<> store(dir / "db.sqlite", sq::store_options{.stream = "orders"});
    CHECK(store.load() == std::nullopt);
    store.commit(co::partition_id{0}, co::position{41});
    store.commit(co::partition_id{0}, co::position{42});
  }
  sq::position_store<> store(dir / "db.sqlite", sq::store_options{.stream = "orders"});
  CHECK(store.load() == co::position{42});
  sq::position_store<> other_stream(dir / "db.sqlite", sq::store_options{.stream = "payments"});
  CHECK(other_stream.load() == std::nullopt);

  guarded_t owner(dir / "db.sqlite", sq::sink_options{.stream = "orders"});
  owner.begin();
  CHECK(owner.claim(co::partition_id{0}, co::epoch{1}) == co::position{42});
  owner.commit();
  CHECK_THROWS_AS(store.commit(co::partition_id{0}, co::position{43}), co::fenced);
  CHECK(store.load() == co::position{42});
}

TEST_CASE("a position store on the sink's connection: AtLeastOnce commits rows, then position") {
  scratch_dir dir;
  using log_t = co::memory::log<order_event, co::Synced>;
  log_t log;
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(order(i % 4, i, i / 4 + 1));
  {
    guarded_t sink(dir / "db.sqlite");
    sq::position_store<> store(sink);
    // One connection: no second connection whose commits would make this one's cache stale.
    CHECK(&store.database() == &sink.database());
    co::pipeline<log_t, guarded_t, co::AtLeastOnce<>, co::with_store<sq::position_store<>>> p(
        log, sink, store, co::settings{.batch_size = 4});
    CHECK(p.run() == 10);
    CHECK(store.load() == co::position{10});
    CHECK(rows_of(sink.database()).size() == 4);
    // Each commit was its own: nothing is left open on the shared connection.
    CHECK_FALSE(sink.database().in_transaction());
  }
  // Durable in the file: a store with a connection of its own reads it back.
  sq::position_store<> reopened(dir / "db.sqlite");
  CHECK(reopened.load() == co::position{10});
}

TEST_CASE("a position store on the sink's connection refuses to commit inside its transaction") {
  scratch_dir dir;
  guarded_t sink(dir / "db.sqlite");
  sq::position_store<> store(sink);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, order(1, 1, 1));
  // It would commit with the rows, when they commit, not on its own and now.
  CHECK_THROWS_AS(store.commit(co::partition_id{0}, co::position{1}), std::logic_error);
  sink.rollback();
  CHECK(store.load() == std::nullopt);
  store.commit(co::partition_id{0}, co::position{1});
  CHECK(store.load() == co::position{1});
  // A store with its own connection has no such transaction to join.
  sq::position_store<> own(dir / "db.sqlite");
  CHECK(own.load() == co::position{1});
}

TEST_CASE("a rollback journal (DELETE + EXTRA) works the same way") {
  scratch_dir dir;
  using delete_t = sq::guarded_upsert_sink<orders_flat, sq::delete_extra>;
  delete_t sink(dir / "db.sqlite");
  CHECK(sink.database().durability().journal == "delete");
  CHECK(sink.database().durability().synchronous == 3);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, order(1, 1, 1));
  sink.store_position(co::partition_id{0}, co::position{1});
  sink.commit();
  delete_t reader(dir / "db.sqlite");
  CHECK(reader.load_position() == co::position{1});
  CHECK(rows_of(reader.database()).size() == 1);
}

TEST_CASE("what the sink refuses to do") {
  scratch_dir dir;
  CHECK_THROWS_AS(guarded_t(":memory:"), std::invalid_argument);
  CHECK_THROWS_AS(guarded_t(dir / "db.sqlite", sq::sink_options{.position_table = "p; DROP x"}),
                  std::invalid_argument);
  guarded_t sink(dir / "db.sqlite");
  CHECK_THROWS_AS(sink.commit(), std::logic_error);
  sink.begin();
  CHECK_THROWS_AS(sink.begin(), std::logic_error);
  sink.rollback();
  // Told not to create its tables, a sink on a database without them fails when it prepares
  // its statements, not at the first write.
  CHECK_THROWS_AS(guarded_t(dir / "empty.sqlite", sq::sink_options{.create_tables = false}),
                  sq::infrastructure_error);
}
