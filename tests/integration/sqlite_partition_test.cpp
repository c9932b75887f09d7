// SPDX-License-Identifier: BSL-1.0
// The SQLite adapter's partitioned form on real database files: one table shared by the
// partitions of a stream (the guard within a partition, a key that moved partitions, the
// version guard), positions and owner epochs per partition, the stream's era and partition
// count, and a database written by the adapter before partitions.
#include <doctest/doctest.h>

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

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
using versioned_t = sq::version_guarded_sink<orders_flat, &order_event::event_seq>;
using plog_t = co::memory::partitioned_log<order_event, co::Synced>;
using consumer_t = plog_t::consumer;
using transactional_t = co::pipeline<consumer_t, guarded_t, co::TransactionalPosition<>>;

// ---- what the sinks declare ----------------------------------------------------------------

static_assert(co::has_capability_v<guarded_t, co::PartitionScoped> &&
              co::has_capability_v<guarded_t, co::OffsetGuarded>);
static_assert(co::partitioned_sink<guarded_t> && co::partitioned_fencing_sink<guarded_t> &&
              co::stream_registry<guarded_t> && co::partitioned_watermarked_sink<guarded_t>);
// One form, per partition: a single-partition pipeline reaches partition 0 through it.
static_assert(!co::fencing_sink<guarded_t> && !co::transactional_sink<guarded_t>);
static_assert(co::version_guarded_v<versioned_t> &&
              !co::has_capability_v<versioned_t, co::OffsetGuarded> &&
              !co::has_capability_v<versioned_t, co::PartitionScoped> &&
              co::has_capability_v<versioned_t, co::Idempotent>);
static_assert(co::partitioned_fencing_sink<versioned_t> && co::partitioned_sink<versioned_t>);
static_assert(co::partitioned_position_store<sq::position_store<>> &&
              !co::position_store<sq::position_store<>>);
static_assert(std::is_base_of_v<co::infrastructure_error, co::key_moved_partition>);
// A partitioned source into either guard is legal (R17 wants one of them), with its positions
// in the sink (R19).
static_assert(std::is_class_v<transactional_t> &&
              std::is_class_v<co::pipeline<consumer_t, versioned_t, co::TransactionalPosition<>>>);

namespace {

order_event order(std::int64_t id, std::int64_t total, std::int64_t seq) {
  return order_event{id, 100 + id, total, seq};
}

struct row {
  order_event event;
  std::int64_t partition;
  std::int64_t source_offset;
  friend bool operator==(const row&, const row&) = default;
};

std::vector<row> rows_of(sq::connection& db) {
  auto q = db.prepare(
      "SELECT order_id, customer_id, total_cents, event_seq, source_partition, source_offset "
      "FROM orders_flat ORDER BY order_id");
  std::vector<row> out;
  while (q.step())
    out.push_back(
        row{order_event{q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)},
            q.column_int64(4), q.column_int64(5)});
  return out;
}

// Every statement the connection ran, in all: sqlite3_stmt_status(RUN) summed over the
// connection's prepared statements. The write path may run one statement per row.
int statements_run(sq::connection& db) {
  int runs = 0;
  for (sqlite3_stmt* s = sqlite3_next_stmt(db.get(), nullptr); s != nullptr;
       s = sqlite3_next_stmt(db.get(), s))
    runs += sqlite3_stmt_status(s, SQLITE_STMTSTATUS_RUN, 0);
  return runs;
}

co::partition_id part(std::int32_t k) {
  return co::partition_id{k};
}

// A topic whose orders are partitioned by id: order i lives in partition i % partitions, and
// every order gets `events` events (event_seq 1, 2, ...), interleaved across orders.
plog_t orders_log(std::int32_t partitions, std::int64_t orders, std::int64_t events) {
  plog_t log(static_cast<std::size_t>(partitions));
  for (std::int64_t seq = 1; seq <= events; ++seq)
    for (std::int64_t id = 0; id < orders; ++id)
      log.append(part(static_cast<std::int32_t>(id % partitions)), order(id, id * 1000 + seq, seq));
  return log;
}

// The table the log must leave behind: each order's newest event (highest event_seq), with the
// partition and offset it came from.
std::vector<row> expected_rows(const plog_t& log) {
  std::map<std::int64_t, row> last;
  for (std::int32_t k = 0; k < static_cast<std::int32_t>(log.partition_count()); ++k) {
    for (const auto& r : log.records(part(k))) {
      const auto it = last.find(r.event.order_id);
      if (it == last.end() || it->second.event.event_seq < r.event.event_seq)
        last[r.event.order_id] = row{r.event, k, r.source_offset.value()};
    }
  }
  std::vector<row> out;
  for (const auto& [id, r] : last)
    out.push_back(r);
  return out;
}

}  // namespace

// ---- one table, many partitions ------------------------------------------------------------

TEST_CASE("two partitions share one table: offsets compare within a partition") {
  scratch_dir dir;
  guarded_t sink(dir / "db.sqlite");
  CHECK(sink.apply(part(0), co::offset{5}, order(2, 205, 2)) == co::write_outcome::applied);
  CHECK(sink.apply(part(1), co::offset{1}, order(1, 101, 1)) == co::write_outcome::applied);
  // Offset 3 of partition 1 is newer than partition 1's offset 1, whatever partition 0 holds.
  CHECK(sink.apply(part(1), co::offset{3}, order(1, 103, 2)) == co::write_outcome::applied);
  // Older and equal offsets of the row's own partition: replays, absorbed.
  CHECK(sink.apply(part(0), co::offset{4}, order(2, 204, 1)) == co::write_outcome::absorbed);
  CHECK(sink.apply(part(1), co::offset{3}, order(1, 103, 2)) == co::write_outcome::absorbed);
  CHECK(rows_of(sink.database()) ==
        std::vector<row>{{order(1, 103, 2), 1, 3}, {order(2, 205, 2), 0, 5}});
  CHECK(sink.applied_watermark(part(0)) == co::offset{5});
  CHECK(sink.applied_watermark(part(1)) == co::offset{3});
  CHECK(sink.applied_watermark(part(2)) == std::nullopt);
  CHECK(sink.applied_watermark() == co::offset{5});  // partition 0's
}

TEST_CASE("a row applied is one statement, and only a row the guard kept costs a lookup") {
  scratch_dir dir;
  guarded_t sink(dir / "db.sqlite");
  sink.begin();
  const int before = statements_run(sink.database());
  for (std::int64_t i = 0; i < 10; ++i)
    REQUIRE(sink.apply(part(static_cast<std::int32_t>(i % 2)), co::offset{i}, order(i, i, 1)) ==
            co::write_outcome::applied);
  CHECK(statements_run(sink.database()) - before == 10);
  CHECK(sink.apply(part(0), co::offset{0}, order(0, 0, 1)) == co::write_outcome::absorbed);
  CHECK(statements_run(sink.database()) - before == 12);
  sink.rollback();
}

TEST_CASE("a pipeline over two partitions into one table: positions and recovery per partition") {
  scratch_dir dir;
  // Partition 0 gets far more records than partition 1: a table-wide watermark (11) would be
  // past partition 1's position (5) and recovery would call that an invariant violation.
  plog_t log(2);
  for (std::int64_t i = 0; i < 12; ++i)
    log.append(part(0), order(2 * i, i, i + 1));
  for (std::int64_t i = 0; i < 5; ++i)
    log.append(part(1), order(2 * i + 1, i, i + 1));
  {
    guarded_t sink(dir / "db.sqlite");
    auto consumer = log.make_consumer({part(0), part(1)});
    transactional_t p(consumer, sink, co::settings{.batch_size = 4});
    CHECK(p.run() == 17);
    CHECK(sink.load_position(part(0)) == co::position{12});
    CHECK(sink.load_position(part(1)) == co::position{5});
    CHECK(sink.applied_watermark(part(0)) == co::offset{11});
    CHECK(sink.applied_watermark(part(1)) == co::offset{4});
    CHECK(rows_of(sink.database()) == expected_rows(log));
    CHECK(p.progress(part(1)).applied_watermark == co::offset{4});
  }
  guarded_t sink(dir / "db.sqlite");
  {
    auto consumer = log.make_consumer({part(0), part(1)});
    transactional_t p(consumer, sink, co::settings{.batch_size = 4});
    CHECK(p.recover() == co::position{12});
    CHECK(p.read_position(part(1)) == co::position{5});
  }
  // A row of partition 1 newer than partition 1's position is a real violation, and named.
  sink.apply(part(1), co::offset{9}, order(99, 1, 1));
  auto consumer = log.make_consumer({part(0), part(1)});
  transactional_t p(consumer, sink, co::settings{.batch_size = 4});
  try {
    p.recover();
    FAIL("a row newer than its partition's position went unnoticed");
  } catch (const co::invariant_violation& e) {
    CHECK(e.stored() == co::position{5});
    CHECK(e.watermark() == co::offset{9});
  }
}

namespace {
// Counts what the guard did, per outcome.
struct counting_sink : guarded_t {
  using guarded_t::apply;
  using guarded_t::guarded_t;
  int applied = 0;
  int absorbed = 0;
  co::write_outcome apply(co::partition_id k, co::offset o, const order_event& e) {
    const co::write_outcome r = guarded_t::apply(k, o, e);
    ++(r == co::write_outcome::applied ? applied : absorbed);
    return r;
  }
};
}  // namespace

TEST_CASE("a replay is absorbed per partition (AtLeastOnce, the SQLite position store)") {
  scratch_dir dir;
  const plog_t log = orders_log(3, 9, 4);
  using store_t = sq::position_store<>;
  using pipeline_t =
      co::pipeline<consumer_t, counting_sink, co::AtLeastOnce<>, co::with_store<store_t>>;
  counting_sink sink(dir / "db.sqlite");
  store_t store(dir / "db.sqlite", sq::store_options{.stream = "flat", .topic = "orders"});
  {
    auto consumer = log.make_consumer({part(0), part(1), part(2)});
    pipeline_t p(consumer, sink, store, co::settings{.batch_size = 5});
    CHECK(p.run() == 36);
  }
  CHECK(sink.applied == 36);
  for (std::int32_t k = 0; k < 3; ++k)
    CHECK(store.load(part(k)) == co::position{12});
  const auto after = rows_of(sink.database());
  CHECK(after == expected_rows(log));
  // The positions are lost (a crash between the rows and the store's commit, many times
  // over): every record is read and written again, and every write is absorbed.
  for (std::int32_t k = 0; k < 3; ++k)
    store.commit(part(k), co::position{0});
  auto consumer = log.make_consumer({part(0), part(1), part(2)});
  pipeline_t p(consumer, sink, store, co::settings{.batch_size = 5});
  CHECK(p.run() == 36);
  CHECK(sink.applied == 36);
  CHECK(sink.absorbed == 36);
  CHECK(rows_of(sink.database()) == after);
}

// ---- a key that moved partitions -----------------------------------------------------------

TEST_CASE("a key from another partition is key_moved_partition, never absorbed nor overwritten") {
  scratch_dir dir;
  guarded_t sink(dir / "db.sqlite");
  sink.apply(part(0), co::offset{5}, order(7, 500, 3));
  const auto before = rows_of(sink.database());
  // A newer offset of another partition (an overwrite would lose partition 0's newer record
  // if it came later), and an older one (an absorb would lose this one if it is the newer).
  for (const std::int64_t incoming : {9, 2}) {
    CAPTURE(incoming);
    try {
      sink.apply(part(1), co::offset{incoming}, order(7, 900, 4));
      FAIL("a moved key was written or absorbed");
    } catch (const co::key_moved_partition& e) {
      CHECK(e.stored_partition() == part(0));
      CHECK(e.stored_offset() == co::offset{5});
      CHECK(e.incoming_partition() == part(1));
      CHECK(e.incoming_offset() == co::offset{incoming});
      CHECK(std::string(e.what()).find("order_id=7") != std::string::npos);
    }
    CHECK(rows_of(sink.database()) == before);
  }
}

TEST_CASE("a key from two partitions within one transaction is key_moved_partition too") {
  scratch_dir dir;
  guarded_t sink(dir / "db.sqlite");
  sink.begin();
  CHECK(sink.apply(part(0), co::offset{1}, order(9, 1, 1)) == co::write_outcome::applied);
  CHECK_THROWS_AS(sink.apply(part(1), co::offset{1}, order(9, 2, 2)), co::key_moved_partition);
  sink.rollback();
  CHECK(rows_of(sink.database()).empty());

  // Through a pipeline: one unit holds order 9 from both partitions. It is refused whole, and
  // nothing of it commits, rows or positions.
  plog_t log(2);
  log.append(part(0), order(8, 1, 1));
  log.append(part(0), order(9, 1, 1));
  log.append(part(1), order(9, 2, 2));
  log.append(part(1), order(11, 1, 1));
  auto consumer = log.make_consumer({part(0), part(1)});
  transactional_t p(consumer, sink, co::settings{.batch_size = 4});
  CHECK_THROWS_AS(p.poll_once(), co::key_moved_partition);
  CHECK(rows_of(sink.database()).empty());
  CHECK(sink.load_position(part(0)) == std::nullopt);
  CHECK(sink.load_position(part(1)) == std::nullopt);
}

// ---- the version guard ---------------------------------------------------------------------

TEST_CASE("the version guard accepts a key from another partition when its version is newer") {
  scratch_dir dir;
  versioned_t sink(dir / "db.sqlite");
  CHECK(sink.apply(part(0), co::offset{5}, order(7, 500, 3)) == co::write_outcome::applied);
  // Repartitioned: order 7's next event arrives from partition 1, at a smaller offset.
  CHECK(sink.apply(part(1), co::offset{2}, order(7, 900, 4)) == co::write_outcome::applied);
  CHECK(rows_of(sink.database()) == std::vector<row>{{order(7, 900, 4), 1, 2}});
  // An older version loses whatever its partition and offset; the same version is a replay.
  CHECK(sink.apply(part(0), co::offset{6}, order(7, 600, 3)) == co::write_outcome::absorbed);
  CHECK(sink.apply(part(1), co::offset{2}, order(7, 900, 4)) == co::write_outcome::absorbed);
  CHECK(rows_of(sink.database()) == std::vector<row>{{order(7, 900, 4), 1, 2}});
  CHECK(sink.write_statement().sql().find("WHERE \"orders_flat\".\"event_seq\" < "
                                          "excluded.\"event_seq\"") != std::string::npos);
}

TEST_CASE("the version guard survives a repartition: a new partition count is recorded") {
  // Orders 0..5, first over 2 partitions (order i in partition i % 2); then the topic gets a
  // third partition and every order's second event hashes anew (partition i % 3). The old
  // partitions keep their records and offsets, as a broker's do.
  plog_t before(2);
  plog_t after(3);
  for (std::int64_t id = 0; id < 6; ++id) {
    before.append(part(static_cast<std::int32_t>(id % 2)), order(id, id * 10 + 1, 1));
    after.append(part(static_cast<std::int32_t>(id % 2)), order(id, id * 10 + 1, 1));
  }
  for (std::int64_t id = 0; id < 6; ++id)
    after.append(part(static_cast<std::int32_t>(id % 3)), order(id, id * 10 + 2, 2));

  const auto consume = [&]<class Sink>(Sink& sink) {
    using pipeline_t = co::pipeline<consumer_t, Sink, co::TransactionalPosition<>>;
    {
      auto consumer = before.make_consumer({part(0), part(1)});
      pipeline_t p(consumer, sink, co::settings{.batch_size = 4});
      CHECK(p.run() == 6);
    }
    CHECK(sink.partition_count() == 2);
    auto consumer = after.make_consumer({part(0), part(1), part(2)});
    pipeline_t p(consumer, sink, co::settings{.batch_size = 4});
    return p.run();
  };

  scratch_dir dir;
  versioned_t sink(dir / "versioned.sqlite");
  CHECK(consume(sink) == 6);
  CHECK(sink.partition_count() == 3);
  CHECK(rows_of(sink.database()) == expected_rows(after));
  // The partition-scoped offset guard cannot compare the moved keys' offsets: refused at claim.
  guarded_t guarded(dir / "guarded.sqlite");
  CHECK_THROWS_AS(consume(guarded), co::partition_count_changed);
}

// ---- positions per partition ---------------------------------------------------------------

TEST_CASE("positions per partition: claim raises or fences, store changes one row or fences") {
  scratch_dir dir;
  const sq::sink_options options{.stream = "flat", .topic = "orders", .member = "host-a:17"};
  guarded_t a(dir / "db.sqlite", options);
  a.begin();
  CHECK(a.claim(part(0), co::epoch{5}) == std::nullopt);
  CHECK(a.claim(part(1), co::epoch{3}) == std::nullopt);
  a.store_position(part(0), co::position{10}, co::epoch{5});
  a.store_position(part(1), co::position{4});  // as the epoch claimed in this transaction
  a.commit();
  CHECK(a.load_position(part(0)) == co::position{10});
  CHECK(a.load_position(part(1)) == co::position{4});
  CHECK(a.owner_epoch(part(0)) == co::epoch{5});
  CHECK(a.owner_epoch(part(1)) == co::epoch{3});
  CHECK(a.claimed_epoch(part(1)) == co::epoch{3});
  CHECK(a.claimed_epoch(part(2)) == std::nullopt);

  // A lower epoch is fenced, naming both epochs and the partition; nothing changes.
  a.begin();
  try {
    a.claim(part(1), co::epoch{2});
    FAIL("a lower epoch claimed a partition");
  } catch (const co::fenced& e) {
    CHECK(e.mine() == co::epoch{2});
    CHECK(e.current() == co::epoch{3});
    CHECK(e.partition() == part(1));
  }
  try {
    a.store_position(part(0), co::position{11}, co::epoch{4});
    FAIL("a stale owner stored a position");
  } catch (const co::fenced& e) {
    CHECK(e.current() == co::epoch{5});
    CHECK(e.partition() == part(0));
  }
  a.rollback();
  CHECK(a.owner_epoch(part(1)) == co::epoch{3});
  CHECK(a.load_position(part(0)) == co::position{10});

  // A fresh claim raises by one, atomically, whoever asks.
  guarded_t b(dir / "db.sqlite", sq::sink_options{.stream = "flat", .topic = "orders"});
  b.begin();
  const co::claimed c = b.claim_next(part(1));
  b.commit();
  CHECK(c.owner == co::epoch{4});
  CHECK(c.stored == co::position{4});
  a.begin();
  CHECK(a.claim_next(part(1)).owner == co::epoch{5});
  a.commit();
  b.begin();
  CHECK_THROWS_AS(b.store_position(part(1), co::position{6}), co::fenced);  // b holds epoch 4
  b.rollback();

  // The single-partition calls are partition 0's.
  CHECK(a.load_position() == co::position{10});
  a.begin();
  CHECK(a.claim(co::partition_id{0}, co::epoch{6}) == co::position{10});
  a.store_position(co::partition_id{0}, co::position{12});
  a.commit();
  CHECK(a.load_position(part(0)) == co::position{12});
  CHECK(a.owner_epoch() == co::epoch{6});

  // Other streams and topics have positions of their own.
  guarded_t other(dir / "db.sqlite", sq::sink_options{.stream = "flat", .topic = "payments"});
  CHECK(other.load_position(part(0)) == std::nullopt);

  // Every claim is on record: partition, epoch, and the member that named itself.
  sq::stream_admin admin(dir / "db.sqlite", sq::admin_options{.stream = "flat", .topic = "orders"});
  const auto claims = admin.claims();
  REQUIRE(claims.size() ==
          5);  // (0, 5), (0, 6), (1, 3), (1, 4), (1, 5): the rolled back one is not
  CHECK(claims[0].partition == part(0));
  CHECK(claims[0].owner == co::epoch{5});
  CHECK(claims[0].owner_member == "host-a:17");
  CHECK(claims[3].owner == co::epoch{4});
  CHECK(claims[3].owner_member.empty());
  CHECK(!claims[3].claimed_at.empty());
  const auto parts = admin.partitions();
  REQUIRE(parts.size() == 2);
  CHECK(parts[1].owner == co::epoch{5});
  CHECK(parts[1].owner_member == "host-a:17");
  CHECK(parts[0].stored == co::position{12});
}

TEST_CASE("a position row deleted under its owner is fenced at the next store, not recreated") {
  // An operator deletes a partition's row while its owner runs (to reset it, or by mistake).
  // The owner's next store names an epoch nobody holds any more: it is fenced, as PostgreSQL
  // and the memory table fence it. Until this test SQLite recreated the row owned by the
  // stale epoch, so the deletion was silently undone by whoever wrote next.
  scratch_dir dir;
  const sq::sink_options options{.stream = "flat", .topic = "orders"};
  guarded_t a(dir / "db.sqlite", options);
  a.begin();
  CHECK(a.claim(part(0), co::epoch{5}) == std::nullopt);
  a.store_position(part(0), co::position{10}, co::epoch{5});
  a.commit();
  a.database().exec("DELETE FROM commit_order_positions WHERE \"partition\" = 0");
  a.begin();
  CHECK(a.apply(part(0), co::offset{10}, order(1, 100, 1)) == co::write_outcome::applied);
  try {
    a.store_position(part(0), co::position{11}, co::epoch{5});
    FAIL("a position was stored for a row nobody owns");
  } catch (const co::fenced& e) {
    CHECK(e.mine() == co::epoch{5});
    CHECK(e.current() == co::epoch{0});
    CHECK(e.partition() == part(0));
    // Said as it is: nobody owns the row, rather than "owned at epoch 0".
    CHECK(std::string(e.what()).find("the position row has no owner (epoch 0: it was deleted") !=
          std::string::npos);
  }
  a.rollback();
  CHECK(a.load_position(part(0)) == std::nullopt);
  CHECK(rows_of(a.database()).empty());
  // A new claim makes the row again; an unclaimed sink (epoch 0) still makes its own.
  a.begin();
  CHECK(a.claim(part(0), co::epoch{6}) == std::nullopt);
  a.store_position(part(0), co::position{11}, co::epoch{6});
  a.commit();
  CHECK(a.load_position(part(0)) == co::position{11});
  guarded_t unclaimed(dir / "other.sqlite", options);
  unclaimed.begin();
  unclaimed.store_position(part(0), co::position{3});
  unclaimed.commit();
  CHECK(unclaimed.load_position(part(0)) == co::position{3});
}

TEST_CASE("the SQLite position store keeps a position per partition, fenced by an owner") {
  scratch_dir dir;
  sq::position_store<> store(dir / "db.sqlite", sq::store_options{.stream = "flat"});
  store.commit(part(0), co::position{7});
  store.commit(part(3), co::position{2});
  CHECK(store.load(part(0)) == co::position{7});
  CHECK(store.load(part(3)) == co::position{2});
  CHECK(store.load(part(1)) == std::nullopt);
  CHECK(store.load() == co::position{7});
  guarded_t owner(dir / "db.sqlite", sq::sink_options{.stream = "flat"});
  owner.begin();
  owner.claim(part(3), co::epoch{1});
  owner.commit();
  CHECK_THROWS_AS(store.commit(part(3), co::position{5}), co::fenced);
  store.commit(part(0), co::position{8});  // partition 0 is nobody's: still the store's
  CHECK(store.load(part(3)) == co::position{2});
  CHECK(store.load(part(0)) == co::position{8});
}

// ---- fencing per partition, two consumers --------------------------------------------------

namespace {
struct table_state {
  std::vector<row> rows;
  std::vector<std::optional<co::position>> positions;
  friend bool operator==(const table_state&, const table_state&) = default;
};
table_state state_of(guarded_t& sink, std::int32_t partitions) {
  table_state s{rows_of(sink.database()), {}};
  for (std::int32_t k = 0; k < partitions; ++k)
    s.positions.push_back(sink.load_position(part(k)));
  return s;
}

// A consumer of partitions {0, 1} is joined by one that takes partition 1 over; the first
// one's next unit (rows of both partitions) is fenced and nothing of it commits.
void takeover(std::optional<co::epoch> first_epoch, std::optional<co::epoch> second_epoch,
              co::epoch expected_first, co::epoch expected_second) {
  scratch_dir dir;
  const plog_t log = orders_log(2, 6, 4);
  guarded_t first_sink(dir / "db.sqlite", sq::sink_options{.member = "first"});
  guarded_t second_sink(dir / "db.sqlite", sq::sink_options{.member = "second"});
  auto first_consumer = log.make_consumer({part(0), part(1)});
  auto second_consumer = log.make_consumer({part(1)});
  transactional_t first(first_consumer, first_sink,
                        co::settings{.batch_size = 4, .owner_epoch = first_epoch});
  CHECK(first.poll_once() == 4);  // two records of each partition
  CHECK(first_sink.owner_epoch(part(1)) == expected_first);

  transactional_t second(second_consumer, second_sink,
                         co::settings{.batch_size = 4, .owner_epoch = second_epoch});
  CHECK(second.recover() == co::position{2});
  CHECK(second_sink.owner_epoch(part(1)) == expected_second);
  const table_state at_takeover = state_of(first_sink, 2);

  try {
    first.poll_once();
    FAIL("a stale owner committed");
  } catch (const co::fenced& e) {
    CHECK(e.mine() == expected_first);
    CHECK(e.current() == expected_second);
    CHECK(e.partition() == part(1));
  }
  // Nothing of the fenced unit: not partition 1's rows, and not partition 0's either.
  CHECK(state_of(first_sink, 2) == at_takeover);

  // The new owner finishes partition 1; the first consumer, told it has partition 0 only,
  // finishes that (a restart re-claims partition 0 at its own epoch or a fresh one).
  CHECK(second.run() == 10);
  first_consumer.assign({part(0)});
  transactional_t first_again(first_consumer, first_sink,
                              co::settings{.batch_size = 4, .owner_epoch = first_epoch});
  CHECK(first_again.run() == 10);
  CHECK(rows_of(first_sink.database()) == expected_rows(log));
  CHECK(first_sink.load_position(part(0)) == co::position{12});
  CHECK(first_sink.load_position(part(1)) == co::position{12});
}
}  // namespace

TEST_CASE("two consumers with explicit epochs: the newer owner of a partition fences the older") {
  takeover(co::epoch{1}, co::epoch{2}, co::epoch{1}, co::epoch{2});
}

TEST_CASE("two consumers given no epoch: the one started last wins, the first is fenced") {
  takeover(std::nullopt, std::nullopt, co::epoch{1}, co::epoch{2});
}

// ---- what the owners of a stream share -----------------------------------------------------

TEST_CASE("a changed partition count is refused at claim until the operator accepts it") {
  scratch_dir dir;
  const plog_t two = orders_log(2, 4, 2);
  const plog_t three = orders_log(3, 6, 2);
  const plog_t four = orders_log(4, 8, 2);
  guarded_t sink(dir / "db.sqlite");
  {
    auto consumer = two.make_consumer({part(0), part(1)});
    transactional_t p(consumer, sink, co::settings{.batch_size = 4});
    p.recover();
  }
  CHECK(sink.partition_count() == 2);
  const co::epoch owner_before = sink.owner_epoch(part(0));

  auto consumer = three.make_consumer({part(0), part(1), part(2)});
  transactional_t p(consumer, sink, co::settings{.batch_size = 4});
  try {
    p.recover();
    FAIL("a repartitioned stream was claimed");
  } catch (const co::partition_count_changed& e) {
    CHECK(e.stored() == 2);
    CHECK(e.current() == 3);
  }
  // The refused claim left nothing behind: no epoch raised, no partition 2.
  CHECK(sink.owner_epoch(part(0)) == owner_before);
  sq::stream_admin admin(dir / "db.sqlite");
  CHECK(admin.partitions().size() == 2);

  // Accepting another count than the stream has still refuses it.
  admin.accept_partition_count(4);
  CHECK_THROWS_AS(p.recover(), co::partition_count_changed);
  admin.accept_partition_count(3);
  CHECK(p.recover() == co::position{0});
  CHECK(admin.partitions().size() == 3);

  // Or forget the count: the next claim records what it sees.
  auto consumer4 = four.make_consumer({part(0), part(1), part(2), part(3)});
  transactional_t p4(consumer4, sink, co::settings{.batch_size = 4});
  CHECK_THROWS_AS(p4.recover(), co::partition_count_changed);
  // An operator's act is its own transaction: inside a unit, a rollback would take it back.
  sink.begin();
  CHECK_THROWS_AS(sink.accept_partition_count(), std::logic_error);
  CHECK_THROWS_AS(sink.accept_partition_count(4), std::logic_error);
  CHECK_THROWS_AS(sink.bump_era(), std::logic_error);
  sink.rollback();
  sink.accept_partition_count();
  p4.recover();
  CHECK(sink.partition_count() == 4);
}

TEST_CASE("a recreated consumer group is fenced until the operator bumps the era") {
  scratch_dir dir;
  using group_t = co::memory::group<order_event, co::Synced>;
  using member_pipeline =
      co::pipeline<group_t::member_consumer, guarded_t, co::TransactionalPosition<>>;
  const plog_t log = orders_log(2, 4, 3);

  // The first group reaches generation 5 before its member reads.
  group_t first_group(log);
  const auto old_member = first_group.join();
  for (int i = 0; i < 2; ++i)
    first_group.leave(first_group.join());
  CHECK(first_group.generation() == 5);
  guarded_t old_sink(dir / "db.sqlite");
  auto old_consumer = first_group.consumer_of(old_member);
  member_pipeline old_pipeline(old_consumer, old_sink, co::settings{.batch_size = 2});
  CHECK(old_pipeline.poll_once() == 2);
  CHECK(old_sink.owner_epoch(part(0)) == co::epoch::of(0, 5));

  // The group is deleted and recreated: its generations start again at 1, below the stored
  // epochs, so its member is fenced, and told how to get out.
  group_t second_group(log);
  const auto new_member = second_group.join();
  guarded_t new_sink(dir / "db.sqlite");
  auto new_consumer = second_group.consumer_of(new_member);
  member_pipeline new_pipeline(new_consumer, new_sink, co::settings{.batch_size = 2});
  try {
    new_pipeline.poll_once();
    FAIL("a restarted generation claimed partitions owned at a higher epoch");
  } catch (const co::fenced& e) {
    CHECK(e.mine() == co::epoch::of(0, 1));
    CHECK(e.current() == co::epoch::of(0, 5));
    CHECK(std::string(e.what()).find("era") != std::string::npos);
  }

  // The operator's way out, without a pipeline; then the same member claims at era 1.
  sq::stream_admin admin(dir / "db.sqlite");
  CHECK(admin.era() == 0);
  CHECK(admin.bump_era() == 1);
  CHECK(new_sink.era() == 1);
  CHECK(new_pipeline.run() == 10);
  CHECK(new_sink.owner_epoch(part(0)) == co::epoch::of(1, 1));
  CHECK(new_sink.owner_epoch(part(1)) == co::epoch::of(1, 1));
  CHECK(rows_of(new_sink.database()) == expected_rows(log));

  // A member of the old group that goes on is a zombie now: fenced at its next write.
  const auto rows = rows_of(new_sink.database());
  CHECK_THROWS_AS(old_pipeline.poll_once(), co::fenced);
  CHECK(rows_of(new_sink.database()) == rows);
  // The sink's own bump commits on its own too.
  CHECK(old_sink.bump_era() == 2);
  CHECK(admin.era() == 2);
}

// ---- a database written before partitions --------------------------------------------------

namespace {
// The schema and rows the SQLite adapter wrote before partitions (its exact CREATE statements).
void write_old_layout(const std::filesystem::path& file) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(file.string().c_str(), &db) == SQLITE_OK);
  const char* sql =
      "CREATE TABLE IF NOT EXISTS \"orders_flat\" (\"order_id\" INTEGER NOT NULL, "
      "\"customer_id\" INTEGER NOT NULL, \"total_cents\" INTEGER NOT NULL, \"event_seq\" INTEGER "
      "NOT NULL, \"source_offset\" INTEGER NOT NULL, PRIMARY KEY (\"order_id\"));"
      "CREATE TABLE IF NOT EXISTS \"commit_order_positions\" (stream TEXT PRIMARY KEY NOT NULL, "
      "position INTEGER, owner_epoch INTEGER NOT NULL DEFAULT 0);"
      "INSERT INTO orders_flat VALUES (1, 101, 500, 2, 4), (2, 102, 300, 1, 5);"
      "INSERT INTO commit_order_positions VALUES ('orders', 6, 3), ('payments', 11, 0);";
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

struct other_table final
    : sq::table_layout<"other_table", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"event_seq", &order_event::event_seq>>> {};

bool has_index(sq::connection& db, const std::string& name) {
  auto q = db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1");
  q.bind(1, name);
  return q.step() && q.column_int64(0) == 1;
}
}  // namespace

TEST_CASE("a database written before partitions is refused, naming the migration") {
  scratch_dir dir;
  const auto file = dir / "old.sqlite";
  write_old_layout(file);
  const sq::sink_options options{.stream = "orders"};
  try {
    guarded_t sink(file, options);
    FAIL("the old data table was accepted");
  } catch (const sq::outdated_layout& e) {
    CHECK(e.table() == "orders_flat");
    CHECK(e.missing_column() == "source_partition");
    CHECK(e.migration().find("ALTER TABLE \"orders_flat\" ADD COLUMN \"source_partition\"") !=
          std::string::npos);
    CHECK(std::string(e.what()).find("migrate_to_partitions") != std::string::npos);
  }
  // A sink of a new table in the same file still finds the old position table, and refuses
  // before it creates anything.
  try {
    sq::guarded_upsert_sink<other_table> sink(file, options);
    FAIL("the old position table was accepted");
  } catch (const sq::outdated_layout& e) {
    CHECK(e.table() == "commit_order_positions");
    CHECK(e.missing_column() == "partition");
  }
  CHECK_THROWS_AS(sq::position_store<>(file, sq::store_options{.stream = "orders"}),
                  sq::outdated_layout);
  CHECK_THROWS_AS(sq::stream_admin{file}, sq::outdated_layout);
  {
    auto db = sq::connection::open_keeping_journal(file);
    CHECK(!sq::detail::has_table(db, "other_table"));
    CHECK(!sq::detail::has_table(db, "commit_order_streams"));
  }
  static_assert(!std::is_base_of_v<co::infrastructure_error, sq::outdated_layout>);
}

TEST_CASE("the migration keeps every position, epoch and row, and runs once") {
  scratch_dir dir;
  const auto file = dir / "old.sqlite";
  write_old_layout(file);
  const sq::migration_result done = sq::migrate_to_partitions<orders_flat, other_table>(file);
  CHECK(done.positions);
  CHECK(done.tables == 1);  // other_table does not exist: nothing to migrate
  const sq::migration_result again = sq::migrate_to_partitions<orders_flat>(file);
  CHECK(!again.positions);
  CHECK(again.tables == 0);

  guarded_t sink(file, sq::sink_options{.stream = "orders"});
  CHECK(has_index(sink.database(), "orders_flat_by_source_partition_source_offset"));
  CHECK(sink.load_position() == co::position{6});
  CHECK(sink.owner_epoch() == co::epoch{3});
  CHECK(rows_of(sink.database()) ==
        std::vector<row>{{order(1, 500, 2), 0, 4}, {order(2, 300, 1), 0, 5}});
  sq::position_store<> payments(file, sq::store_options{.stream = "payments"});
  CHECK(payments.load() == co::position{11});

  // The stream goes on where it was: a replay is absorbed, the next record applies, and a
  // pipeline resumes at the stored position with a claim above the old epoch.
  CHECK(sink.apply(co::partition_id{0}, co::offset{5}, order(2, 300, 1)) ==
        co::write_outcome::absorbed);
  co::memory::log<order_event, co::Synced> log;
  for (std::int64_t i = 0; i < 8; ++i)
    log.append(order(i % 3, i, i + 1));
  co::pipeline<co::memory::log<order_event, co::Synced>, guarded_t, co::TransactionalPosition<>> p(
      log, sink, co::settings{.batch_size = 4});
  CHECK(p.recover() == co::position{6});
  CHECK(sink.owner_epoch() == co::epoch{4});
  CHECK(p.run() == 2);
  CHECK(sink.load_position() == co::position{8});
}

TEST_CASE("the migration can name the partition and topic the old stream was") {
  scratch_dir dir;
  const auto file = dir / "old.sqlite";
  write_old_layout(file);
  sq::migrate_to_partitions<orders_flat>(
      file, sq::migration_options{.topic = "orders-topic", .partition = part(3)});
  guarded_t sink(file, sq::sink_options{.stream = "orders", .topic = "orders-topic"});
  CHECK(sink.load_position(part(3)) == co::position{6});
  CHECK(sink.load_position(part(0)) == std::nullopt);
  CHECK(rows_of(sink.database()).front().partition == 3);
  CHECK(sink.applied_watermark(part(3)) == co::offset{5});
}

namespace {
struct unindexed final
    : sq::table_layout<"unindexed", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"event_seq", &order_event::event_seq>>> {
  static constexpr bool partition_index = false;
};
}  // namespace

TEST_CASE("a layout without the partition index: no index, the watermark still right") {
  scratch_dir dir;
  sq::guarded_upsert_sink<unindexed> sink(dir / "db.sqlite");
  sink.apply(part(1), co::offset{4}, order(1, 1, 1));
  sink.apply(part(0), co::offset{9}, order(2, 1, 1));
  CHECK(!has_index(sink.database(), "unindexed_by_source_partition_source_offset"));
  CHECK(sink.applied_watermark(part(1)) == co::offset{4});
  CHECK(sink.applied_watermark(part(0)) == co::offset{9});
}
