// SPDX-License-Identifier: BSL-1.0
// The cases of the SQLite benchmark: for each policy (TransactionalPosition, AtLeastOnce with
// the SQLite position store on the sink's connection), each synchronous level (WAL + FULL,
// WAL + NORMAL) and each batch size, the library's pipeline and the loop a careful engineer
// writes by hand with the sqlite3 C API. The hand-written twin issues the same SQL statements, in
// the same order, with the same bound values, on the same number of connections as the adapter
// (sqlite_bench --verify checks it by tracing both): same pragmas, same schema (the rows carry
// source_partition, indexed with source_offset; positions keyed by stream, topic and partition;
// the claim and stream tables), same layout checks, the same upsert guarded within a partition
// (with the lookup that tells a replay from a moved key when it changes no row), the same
// fenced position upsert, and under TransactionalPosition the same recovery (a fresh epoch
// claimed in one statement, the claim recorded, the partition's watermark checked). It is also
// the fastest honest loop for its policy: each batch's rows in one transaction, then
// (AtLeastOnce) the position's own commit.
//
// Every case starts from the same seeded database: `orders` rows of partition 0 and the
// position row written before it is opened, so every measured record updates an existing row
// with a newer offset (the same work at every batch size, from the first record on).
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "seeded_orders.hpp"

#include "support/scratch.hpp"

namespace sqlite_bench {

namespace co = commit_order;
namespace sq = commit_order::sqlite;

using bench_support::log_t;
using bench_support::order_event;
using bench_support::orders;
using bench_support::reader_t;

struct orders_flat final
    : sq::table_layout<"orders_flat", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"customer_id", &order_event::customer_id>,
                                         sq::column<"total_cents", &order_event::total_cents>,
                                         sq::column<"event_seq", &order_event::event_seq>>> {};

/// Records a case consumes before its database is rebuilt (a round).
inline constexpr std::int64_t round_records = std::int64_t{1} << 17;

/// The seeded records and one round after them (bench/seeded_orders.hpp).
inline const log_t& shared_log() {
  static const log_t log = bench_support::seeded_log(round_records);
  return log;
}

enum class policy_id { transactional_position, at_least_once };
enum class sync_id { full, normal };

inline const char* name(policy_id p) {
  return p == policy_id::transactional_position ? "TransactionalPosition" : "AtLeastOnce";
}
inline const char* name(sync_id s) {
  return s == sync_id::full ? "FULL" : "NORMAL";
}

template <sync_id S>
using durability_t = std::conditional_t<S == sync_id::full, sq::wal_full, sq::wal_normal>;

// ---- the SQL, written out by hand -----------------------------------------------------------
//
// The twin spells out every statement the adapter generates from `orders_flat` and its
// defaults. Nothing is copied from the adapter at run time: --verify compares what the two
// actually execute.

namespace sql {
inline constexpr const char* create_orders =
    "CREATE TABLE IF NOT EXISTS \"orders_flat\" (\"order_id\" INTEGER NOT NULL, \"customer_id\" "
    "INTEGER NOT NULL, \"total_cents\" INTEGER NOT NULL, \"event_seq\" INTEGER NOT NULL, "
    "\"source_offset\" INTEGER NOT NULL, \"source_partition\" INTEGER NOT NULL, PRIMARY KEY "
    "(\"order_id\"))";
// The applied watermark of one partition reads it; every upsert moves its entry.
inline constexpr const char* create_partition_index =
    "CREATE INDEX IF NOT EXISTS \"orders_flat_by_source_partition_source_offset\" ON "
    "\"orders_flat\" (\"source_partition\", \"source_offset\")";
inline constexpr const char* create_positions =
    "CREATE TABLE IF NOT EXISTS \"commit_order_positions\" (stream TEXT NOT NULL, topic TEXT NOT "
    "NULL, \"partition\" INTEGER NOT NULL, position INTEGER, owner_epoch INTEGER NOT NULL DEFAULT "
    "0, bound_to TEXT, fingerprint INTEGER, fingerprint_position INTEGER, PRIMARY KEY (stream, "
    "topic, \"partition\"))";
inline constexpr const char* create_claims =
    "CREATE TABLE IF NOT EXISTS \"commit_order_claims\" (stream TEXT NOT NULL, topic TEXT NOT "
    "NULL, \"partition\" INTEGER NOT NULL, owner_epoch INTEGER NOT NULL, owner_member TEXT, "
    "claimed_at TEXT NOT NULL, PRIMARY KEY (stream, topic, \"partition\", owner_epoch))";
inline constexpr const char* create_streams =
    "CREATE TABLE IF NOT EXISTS \"commit_order_streams\" (stream TEXT NOT NULL, topic TEXT NOT "
    "NULL, era INTEGER NOT NULL DEFAULT 0, partition_count INTEGER, PRIMARY KEY (stream, topic))";
// The guarded upsert: a row is replaced only by a newer offset of its own partition.
inline constexpr const char* upsert_order =
    "INSERT INTO \"orders_flat\" (\"order_id\", \"customer_id\", \"total_cents\", \"event_seq\", "
    "\"source_offset\", \"source_partition\") VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT "
    "(\"order_id\") DO UPDATE SET \"customer_id\" = excluded.\"customer_id\", \"total_cents\" = "
    "excluded.\"total_cents\", \"event_seq\" = excluded.\"event_seq\", \"source_offset\" = "
    "excluded.\"source_offset\", \"source_partition\" = excluded.\"source_partition\" WHERE "
    "\"orders_flat\".\"source_partition\" = excluded.\"source_partition\" AND "
    "\"orders_flat\".\"source_offset\" < excluded.\"source_offset\"";
// When the upsert changed no row: a replay (same partition) or a key that moved partition.
inline constexpr const char* stored_by_key =
    "SELECT \"source_partition\", \"source_offset\" FROM \"orders_flat\" WHERE \"order_id\" = ?1";
// A position store's read: the position and what the row vouches for (its data table).
inline constexpr const char* load_position =
    "SELECT position, owner_epoch, bound_to, CASE WHEN fingerprint_position = position THEN "
    "fingerprint END FROM \"commit_order_positions\" WHERE stream = ?1 AND "
    "topic = ?2 AND \"partition\" = ?3";
// Fenced: the write only lands while the row's owner epoch is the writer's. An owner's write
// (epoch above 0, after its claim made the row) only updates.
inline constexpr const char* store_claimed_position =
    "UPDATE \"commit_order_positions\" SET position = ?4, fingerprint = ?6, fingerprint_position "
    "= ?4 WHERE stream = ?1 AND topic = ?2 AND \"partition\" = ?3 AND owner_epoch = ?5";
// Epoch 0 (no claim): the first write makes the row.
inline constexpr const char* store_position =
    "INSERT INTO \"commit_order_positions\" AS t (stream, topic, \"partition\", position, "
    "owner_epoch, fingerprint, fingerprint_position) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?4) ON "
    "CONFLICT (stream, topic, \"partition\") DO UPDATE SET position = excluded.position, "
    "fingerprint = excluded.fingerprint, fingerprint_position = excluded.fingerprint_position "
    "WHERE t.owner_epoch = excluded.owner_epoch";
// A position store's first read reserves the row for the data table (it changes no row that
// exists), so a second consumer started at the same time is refused at its own read.
inline constexpr const char* reserve_position =
    "INSERT INTO \"commit_order_positions\" (stream, topic, \"partition\", position, owner_epoch, "
    "bound_to) VALUES (?1, ?2, ?3, NULL, 0, ?4) ON CONFLICT (stream, topic, \"partition\") DO "
    "NOTHING";
// A position store's write: it binds the row to the data table, and changes no row of another
// owner epoch or bound to another table.
inline constexpr const char* store_bound_position =
    "INSERT INTO \"commit_order_positions\" AS t (stream, topic, \"partition\", position, "
    "owner_epoch, bound_to, fingerprint, fingerprint_position) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
    "?7, ?4) ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET position = "
    "excluded.position, bound_to = excluded.bound_to, fingerprint = excluded.fingerprint, "
    "fingerprint_position = excluded.fingerprint_position WHERE t.owner_epoch = "
    "excluded.owner_epoch AND (t.bound_to IS NULL OR t.bound_to IS excluded.bound_to)";
// Recovery under TransactionalPosition claims the row for the epoch one above the row's, in one
// statement (no owner epoch is configured: the consumer started last owns the position, and
// the one before is fenced at its next write).
// The claim binds the row to the data table, and returns the binding it holds after it.
inline constexpr const char* claim_next =
    "INSERT INTO \"commit_order_positions\" AS t (stream, topic, \"partition\", position, "
    "owner_epoch, bound_to) VALUES (?1, ?2, ?3, NULL, 1, ?4) ON CONFLICT (stream, topic, "
    "\"partition\") DO UPDATE SET owner_epoch = t.owner_epoch + 1, bound_to = "
    "COALESCE(t.bound_to, excluded.bound_to) RETURNING owner_epoch, position, bound_to, CASE "
    "WHEN fingerprint_position = position THEN fingerprint END";
// What the sink's position rows vouch for: its data table.
inline constexpr const char* bound_to = "'orders_flat'";
// Who claimed what, when: written in the claim's transaction.
inline constexpr const char* record_claim =
    "INSERT INTO \"commit_order_claims\" (stream, topic, \"partition\", owner_epoch, "
    "owner_member, claimed_at) VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ', "
    "'now')) ON CONFLICT (stream, topic, \"partition\", owner_epoch) DO UPDATE SET owner_member "
    "= excluded.owner_member, claimed_at = excluded.claimed_at";
inline constexpr const char* watermark =
    "SELECT MAX(\"source_offset\") FROM \"orders_flat\" WHERE \"source_partition\" = ?1";
// The layout checks before anything is created (a file of the adapter before partitions is
// refused): does the table exist, does it have the column.
inline constexpr const char* table_exists = "SELECT count(*) FROM pragma_table_info(?1)";
inline constexpr const char* has_column =
    "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE";
inline constexpr const char* stream = "default";
inline constexpr const char* topic = "";
}  // namespace sql

// ---- the seeded database --------------------------------------------------------------------

[[noreturn, gnu::cold, gnu::noinline]] inline void fail(sqlite3* db, int rc, const char* doing) {
  throw std::runtime_error(std::string("sqlite_bench: ") + doing + ": " +
                           (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

/// Writes the tables, `orders` rows (offsets 0 .. orders-1) and the position row (`position`:
/// `orders` unless a check wants records replayed) into a new WAL database, then closes it. Not
/// part of any measurement or trace.
inline void seed(const std::filesystem::path& file, std::int64_t position = orders) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  const auto run = [&](const char* text) {
    if (const int r = sqlite3_exec(db, text, nullptr, nullptr, nullptr); r != SQLITE_OK)
      fail(db, r, text);
  };
  try {
    if (rc != SQLITE_OK)
      fail(db, rc, "seed: open");
    run("PRAGMA journal_mode = wal");
    // The layout the adapter writes: a file without source_partition would be refused.
    run(sql::create_orders);
    run(sql::create_partition_index);
    run(sql::create_positions);
    run(sql::create_claims);
    run(sql::create_streams);
    run("BEGIN IMMEDIATE");
    sqlite3_stmt* s = nullptr;
    if ((rc = sqlite3_prepare_v2(db, sql::upsert_order, -1, &s, nullptr)) != SQLITE_OK)
      fail(db, rc, "seed: prepare");
    for (const auto& r : shared_log().records().first(static_cast<std::size_t>(orders))) {
      sqlite3_bind_int64(s, 1, r.event.order_id);
      sqlite3_bind_int64(s, 2, r.event.customer_id);
      sqlite3_bind_int64(s, 3, r.event.total_cents);
      sqlite3_bind_int64(s, 4, r.event.event_seq);
      sqlite3_bind_int64(s, 5, r.source_offset.value());
      sqlite3_bind_int64(s, 6, 0);
      rc = sqlite3_step(s);
      sqlite3_reset(s);
      if (rc != SQLITE_DONE) {
        sqlite3_finalize(s);
        fail(db, rc, "seed: insert");
      }
    }
    sqlite3_finalize(s);
    run(("INSERT INTO \"commit_order_positions\" (stream, topic, \"partition\", position, "
         "owner_epoch) VALUES ('default', '', 0, " +
         std::to_string(position) + ", 0)")
            .c_str());
    run("COMMIT");
    run("PRAGMA wal_checkpoint(TRUNCATE)");
  } catch (...) {
    sqlite3_close_v2(db);
    throw;
  }
  sqlite3_close_v2(db);
}

/// A seeded database in a fresh scratch directory, removed with it.
struct seeded_database {
  test_support::scratch_dir dir;
  std::filesystem::path file = dir / "bench.sqlite";
  explicit seeded_database(std::int64_t position = orders) { seed(file, position); }
};

/// A case on its own seeded database (destroyed with it).
template <class Case>
struct instance {
  seeded_database db;
  Case c;
  explicit instance(std::size_t batch) : c(db.file, batch) {}
};

// ---- the library ----------------------------------------------------------------------------

/// The library. Under AtLeastOnce the position store shares the sink's connection, unless
/// `StoreOwnConnection` (a reference configuration the callgrind report measures: the store
/// opening its own connection to the same file).
template <policy_id P, sync_id S, bool StoreOwnConnection = false>
struct pipeline_case {
  using durability = durability_t<S>;
  using sink_t = sq::guarded_upsert_sink<orders_flat, durability>;
  using store_t = sq::position_store<durability>;
  using pipeline_t = std::conditional_t<
      P == policy_id::transactional_position,
      co::pipeline<reader_t, sink_t, co::TransactionalPosition<>>,
      co::pipeline<reader_t, sink_t, co::AtLeastOnce<>, co::with_store<store_t>>>;

  reader_t reader = shared_log().make_reader();
  sink_t sink;
  std::optional<store_t> store;
  std::optional<pipeline_t> p;

  pipeline_case(const std::filesystem::path& file, std::size_t batch) : sink(file) {
    if constexpr (P == policy_id::transactional_position) {
      p.emplace(reader, sink, co::settings{.batch_size = batch});
    } else {
      if constexpr (StoreOwnConnection) {
        store.emplace(file);
      } else {
        store.emplace(sink);
      }
      p.emplace(reader, sink, *store, co::settings{.batch_size = batch});
    }
    p->recover();
  }
  /// One batch; the records it handled (0 at the end of the round).
  [[gnu::noinline]] std::size_t step() { return p->poll_once(); }
};

// ---- the hand-written twin ------------------------------------------------------------------

/// Deliberate departures from the library's statements: --verify must tell each apart.
/// `second_connection` is also the twin of the reference configuration
/// (pipeline_case<at_least_once, S, true>): the position on a connection of its own.
enum class flaw {
  none,
  commit_per_row,     ///< AtLeastOnce as it was: every row its own transaction
  position_first,     ///< the position staged before the rows
  plain_begin,        ///< BEGIN instead of BEGIN IMMEDIATE
  position_at_last,   ///< the position names the last record instead of the one after it
  no_read_back,       ///< the pragmas set but not read back
  second_connection,  ///< AtLeastOnce with the position on a second connection
};

class raw_statement final {
 public:
  raw_statement(sqlite3* db, const char* text) : db_(db) {
    if (const int rc = sqlite3_prepare_v3(db, text, -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr);
        rc != SQLITE_OK)
      fail(db, rc, text);
  }
  raw_statement(const raw_statement&) = delete;
  raw_statement& operator=(const raw_statement&) = delete;
  ~raw_statement() { sqlite3_finalize(s_); }
  [[nodiscard]] sqlite3_stmt* get() const noexcept { return s_; }
  /// Steps a statement that returns no row, and resets it.
  void run() {
    const int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    if (rc != SQLITE_DONE) [[unlikely]]
      fail(db_, rc, sqlite3_sql(s_));
  }
  /// Steps a `SELECT count(*) ...` and resets it: true when the count is not zero.
  bool count_nonzero() {
    const int rc = sqlite3_step(s_);
    const bool nonzero = rc == SQLITE_ROW && sqlite3_column_int64(s_, 0) > 0;
    sqlite3_reset(s_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) [[unlikely]]
      fail(db_, rc, sqlite3_sql(s_));
    return nonzero;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

/// One connection, opened and set up as the adapter does: extended result codes, a 5 s busy
/// timeout, WAL, the synchronous level, both read back.
class raw_connection final {
 public:
  raw_connection(const std::filesystem::path& file, sync_id sync, bool read_back = true) {
    int rc =
        sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_close_v2(db_);
      fail(nullptr, rc, "open");
    }
    try {
      sqlite3_extended_result_codes(db_, 1);
      sqlite3_busy_timeout(db_, 5000);
      {
        raw_statement journal(db_, "PRAGMA journal_mode = wal");
        if ((rc = sqlite3_step(journal.get())) != SQLITE_ROW)
          fail(db_, rc, "PRAGMA journal_mode = wal");
      }
      exec(sync == sync_id::full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
      if (read_back) {
        raw_statement journal(db_, "PRAGMA journal_mode");
        raw_statement level(db_, "PRAGMA synchronous");
        if (sqlite3_step(journal.get()) != SQLITE_ROW ||
            std::strcmp(reinterpret_cast<const char*>(sqlite3_column_text(journal.get(), 0)),
                        "wal") != 0 ||
            sqlite3_step(level.get()) != SQLITE_ROW ||
            sqlite3_column_int(level.get(), 0) != (sync == sync_id::full ? 2 : 1))
          throw std::runtime_error("sqlite_bench: the database does not run the pragmas asked");
      }
    } catch (...) {
      sqlite3_close_v2(db_);
      throw;
    }
  }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;
  ~raw_connection() { sqlite3_close_v2(db_); }

  void exec(const char* text) {
    if (const int rc = sqlite3_exec(db_, text, nullptr, nullptr, nullptr); rc != SQLITE_OK)
      fail(db_, rc, text);
  }
  [[nodiscard]] sqlite3* get() const noexcept { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

/// Runs `ddl` on `c`, then hands out its handle: the statements a member initialiser prepares
/// after the table they need exists.
inline sqlite3* after(raw_connection& c, const char* ddl) {
  c.exec(ddl);
  return c.get();
}

/// What the adapter checks before it creates anything: a table written before partitions
/// (present, without `column`) is refused rather than written with statements it cannot run.
inline void check_layout(raw_connection& c, const char* table, const char* column) {
  raw_statement exists(c.get(), sql::table_exists);
  sqlite3_bind_text(exists.get(), 1, table, -1, SQLITE_STATIC);
  if (!exists.count_nonzero())
    return;
  raw_statement has(c.get(), sql::has_column);
  sqlite3_bind_text(has.get(), 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(has.get(), 2, column, -1, SQLITE_STATIC);
  if (!has.count_nonzero())
    throw std::runtime_error(std::string("sqlite_bench: table ") + table + " has no column " +
                             column + ": written before partitions");
}

/// The position table's check and creation, the check that it has the binding column (a table
/// written before it gains it), then the handle (for the statements that use it).
inline sqlite3* position_table(raw_connection& c) {
  check_layout(c, "commit_order_positions", "partition");
  c.exec(sql::create_positions);
  check_layout(c, "commit_order_positions", "bound_to");
  check_layout(c, "commit_order_positions", "fingerprint");
  check_layout(c, "commit_order_positions", "fingerprint_position");
  return c.get();
}

/// The sink's set-up up to its data table: both layouts checked, the table and its partition
/// index created.
inline sqlite3* sink_table(raw_connection& c) {
  check_layout(c, "orders_flat", "source_partition");
  check_layout(c, "commit_order_positions", "partition");
  c.exec(sql::create_orders);
  return after(c, sql::create_partition_index);
}

/// The sink's last tables: where claims are recorded, and what a stream's owners share.
inline sqlite3* claim_and_stream_tables(raw_connection& c) {
  c.exec(sql::create_claims);
  return after(c, sql::create_streams);
}

/// The position rows' statements on one connection, for partition 0 of topic '' of stream
/// 'default' (stream and topic bound once: they never change).
struct raw_positions {
  raw_statement load;
  raw_statement store;
  raw_statement store_claimed;
  raw_statement store_bound;
  raw_statement reserve;
  raw_statement claim;

  explicit raw_positions(raw_connection& c)
      : load(position_table(c), sql::load_position)
      , store(c.get(), sql::store_position)
      , store_claimed(c.get(), sql::store_claimed_position)
      , store_bound(c.get(), sql::store_bound_position)
      , reserve(c.get(), sql::reserve_position)
      , claim(c.get(), sql::claim_next) {
    for (sqlite3_stmt* s : {load.get(), store.get(), store_claimed.get(), store_bound.get(),
                            reserve.get(), claim.get()}) {
      sqlite3_bind_text(s, 1, sql::stream, -1, SQLITE_STATIC);
      sqlite3_bind_text(s, 2, sql::topic, -1, SQLITE_STATIC);
    }
    sqlite3_bind_text(claim.get(), 4, sql::bound_to, -1, SQLITE_STATIC);
    sqlite3_bind_text(store_bound.get(), 6, sql::bound_to, -1, SQLITE_STATIC);
    sqlite3_bind_text(reserve.get(), 4, sql::bound_to, -1, SQLITE_STATIC);
  }

  /// The owner epoch this connection writes positions as (0 until it claims the row).
  std::int64_t epoch = 0;

  /// Raises the row's owner epoch by one (creating the row at 1) and makes it this
  /// connection's; returns the stored position (nullopt: none).
  std::optional<std::int64_t> claim_next(sqlite3* db) {
    sqlite3_stmt* s = claim.get();
    sqlite3_bind_int64(s, 3, 0);
    int rc = sqlite3_step(s);
    std::optional<std::int64_t> stored;
    if (rc == SQLITE_ROW) {
      epoch = sqlite3_column_int64(s, 0);
      if (sqlite3_column_type(s, 1) != SQLITE_NULL)
        stored = sqlite3_column_int64(s, 1);
      const auto* held = reinterpret_cast<const char*>(sqlite3_column_text(s, 2));
      if (held == nullptr || std::string_view(held) != sql::bound_to) {
        sqlite3_reset(s);
        throw std::runtime_error("sqlite_bench: the position row is bound to another table");
      }
      rc = sqlite3_step(s);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
      fail(db, rc, sql::claim_next);
    return stored;
  }

  /// The stored position (nullopt: none), read as a bound store reads it: the row reserved
  /// first.
  std::optional<std::int64_t> read(sqlite3* db) {
    sqlite3_bind_int64(reserve.get(), 3, 0);
    reserve.run();
    sqlite3_stmt* s = load.get();
    sqlite3_bind_int64(s, 3, 0);
    const int rc = sqlite3_step(s);
    std::optional<std::int64_t> stored;
    if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
      stored = sqlite3_column_int64(s, 0);
    const auto* held = rc == SQLITE_ROW ? sqlite3_column_text(s, 2) : nullptr;
    const bool elsewhere =
        held != nullptr && std::string_view(reinterpret_cast<const char*>(held)) != sql::bound_to;
    sqlite3_reset(s);
    if (elsewhere)
      throw std::runtime_error("sqlite_bench: the position row is bound to another table");
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      fail(db, rc, sql::load_position);
    return stored;
  }

  /// The fenced upsert: a row owned by another epoch changes nothing, and that is a failure.
  void write(sqlite3* db, std::int64_t position) {
    raw_statement& statement = epoch == 0 ? store : store_claimed;
    sqlite3_stmt* s = statement.get();
    sqlite3_bind_int64(s, 3, 0);
    sqlite3_bind_int64(s, 4, position);
    sqlite3_bind_int64(s, 5, epoch);
    sqlite3_bind_null(s, 6);  // no fingerprint: a single-partition source has none to give
    statement.run();
    if (sqlite3_changes(db) != 1) [[unlikely]]
      throw std::runtime_error("sqlite_bench: fenced: another owner holds the position row");
  }

  /// A position store's write: bound to the data table, as owner epoch 0.
  void write_bound(sqlite3* db, std::int64_t position) {
    sqlite3_stmt* s = store_bound.get();
    sqlite3_bind_int64(s, 3, 0);
    sqlite3_bind_int64(s, 4, position);
    sqlite3_bind_int64(s, 5, 0);
    sqlite3_bind_null(s, 7);  // no fingerprint: a single-partition source has none to give
    store_bound.run();
    if (sqlite3_changes(db) != 1) [[unlikely]]
      throw std::runtime_error(
          "sqlite_bench: fenced or bound elsewhere: the position row refused the write");
  }
};

template <policy_id P, sync_id S, flaw F = flaw::none>
struct handwritten_case {
  static constexpr bool transactional = P == policy_id::transactional_position;

  reader_t reader = shared_log().make_reader();
  std::size_t batch;
  // The sink's connection: the rows (and, under TransactionalPosition, the position).
  raw_connection rows;
  raw_statement upsert{sink_table(rows), sql::upsert_order};
  raw_positions rows_positions{rows};
  raw_statement record_claim{claim_and_stream_tables(rows), sql::record_claim};
  raw_statement watermark{rows.get(), sql::watermark};
  raw_statement stored_by_key{rows.get(), sql::stored_by_key};
  raw_statement begin{rows.get(), F == flaw::plain_begin ? "BEGIN" : "BEGIN IMMEDIATE"};
  raw_statement commit{rows.get(), "COMMIT"};
  raw_statement rollback{rows.get(), "ROLLBACK"};
  // AtLeastOnce with flaw::second_connection: the position's own connection.
  std::optional<raw_connection> store;
  std::optional<raw_positions> store_positions;

  handwritten_case(const std::filesystem::path& file, std::size_t b)
      : batch(b), rows(file, S, F != flaw::no_read_back) {
    std::optional<std::int64_t> stored;
    if constexpr (transactional) {
      // Recovery inside a transaction: no row may be newer than the position.
      begin.run();
      try {
        // No owner epoch configured: claim the next one, so the last consumer started owns
        // the position and the one before is fenced at its next write; and record the claim.
        stored = rows_positions.claim_next(rows.get());
        sqlite3_bind_text(record_claim.get(), 1, sql::stream, -1, SQLITE_STATIC);
        sqlite3_bind_text(record_claim.get(), 2, sql::topic, -1, SQLITE_STATIC);
        sqlite3_bind_int64(record_claim.get(), 3, 0);
        sqlite3_bind_int64(record_claim.get(), 4, rows_positions.epoch);
        sqlite3_bind_null(record_claim.get(), 5);
        record_claim.run();
        sqlite3_bind_int64(watermark.get(), 1, 0);
        const int rc = sqlite3_step(watermark.get());
        const bool newer = rc == SQLITE_ROW &&
                           sqlite3_column_type(watermark.get(), 0) != SQLITE_NULL &&
                           !(stored && *stored > sqlite3_column_int64(watermark.get(), 0));
        sqlite3_reset(watermark.get());
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
          fail(rows.get(), rc, sql::watermark);
        if (newer)
          throw std::runtime_error("sqlite_bench: rows newer than the stored position");
      } catch (...) {
        rollback.run();
        throw;
      }
      commit.run();
    } else if constexpr (F == flaw::second_connection) {
      store.emplace(file, S, F != flaw::no_read_back);
      store_positions.emplace(*store);
      stored = store_positions->read(store->get());
    } else {
      // The store's set-up on the shared connection: its table checked and created, whatever
      // the sink did.
      position_table(rows);
      stored = rows_positions.read(rows.get());
    }
    reader.seek(co::position{stored.value_or(0)});
  }

  [[gnu::noinline]] std::size_t step() {
    const auto records = reader.poll(batch);
    if (records.empty())
      return 0;
    std::int64_t end = records.back().source_offset.value() + 1;
    if constexpr (F == flaw::position_at_last)
      --end;
    if constexpr (transactional) {
      begin.run();
      try {
        if constexpr (F == flaw::position_first)
          rows_positions.write(rows.get(), end);
        write_rows(records);
        if constexpr (F != flaw::position_first)
          rows_positions.write(rows.get(), end);
        commit.run();
      } catch (...) {
        if (sqlite3_get_autocommit(rows.get()) == 0)
          rollback.run();
        throw;
      }
    } else {
      if constexpr (F == flaw::commit_per_row) {
        write_rows(records);  // each row its own autocommit transaction
      } else {
        begin.run();
        try {
          write_rows(records);
          commit.run();
        } catch (...) {
          if (sqlite3_get_autocommit(rows.get()) == 0)
            rollback.run();
          throw;
        }
      }
      // The position's own autocommit transaction, after the rows' has committed.
      if constexpr (F == flaw::second_connection) {
        store_positions->write_bound(store->get(), end);
      } else {
        rows_positions.write_bound(rows.get(), end);
      }
    }
    return records.size();
  }

  void write_rows(std::span<const log_t::record_type> records) {
    sqlite3_stmt* s = upsert.get();
    for (const auto& r : records) {
      sqlite3_bind_int64(s, 1, r.event.order_id);
      sqlite3_bind_int64(s, 2, r.event.customer_id);
      sqlite3_bind_int64(s, 3, r.event.total_cents);
      sqlite3_bind_int64(s, 4, r.event.event_seq);
      sqlite3_bind_int64(s, 5, r.source_offset.value());
      sqlite3_bind_int64(s, 6, 0);  // the log's only partition
      upsert.run();
      // The guard kept the stored row: a replay of this partition, or a key that moved here
      // from another partition, which must not be absorbed.
      if (sqlite3_changes(rows.get()) == 0) [[unlikely]]
        not_written(r.event.order_id);
    }
  }

  [[gnu::cold, gnu::noinline]] void not_written(std::int64_t order_id) {
    sqlite3_stmt* s = stored_by_key.get();
    sqlite3_bind_int64(s, 1, order_id);
    const int rc = sqlite3_step(s);
    const bool moved = rc == SQLITE_ROW && sqlite3_column_int64(s, 0) != 0;
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      fail(rows.get(), rc, sql::stored_by_key);
    if (moved)
      throw std::runtime_error("sqlite_bench: key moved partition: order " +
                               std::to_string(order_id));
  }
};

}  // namespace sqlite_bench
