// The cases of the SQLite benchmark: for each policy (TransactionalPosition, AtLeastOnce with
// the SQLite position store on the sink's connection), each synchronous level (WAL + FULL,
// WAL + NORMAL) and each batch size, the library's pipeline and the loop a careful engineer
// writes by hand with the sqlite3 C API. The hand-written twin issues the same SQL statements, in
// the same order, with the same bound values, on the same number of connections as the adapter
// (sqlite_bench --verify checks it by tracing both): same schema, same position table and fenced
// upsert, same pragmas. It is also the fastest honest loop for its policy: each batch's rows in one
// transaction, then (AtLeastOnce) the position's own commit.
//
// Every case starts from the same seeded database: `orders` rows and the position row written
// before it is opened, so every measured record updates an existing row with a newer offset
// (the same work at every batch size, from the first record on).
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

#include "support/scratch.hpp"

namespace sqlite_bench {

namespace co = commit_order;
namespace sq = commit_order::sqlite;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  std::int64_t event_seq = 0;
};

struct orders_flat final
    : sq::table_layout<"orders_flat", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"customer_id", &order_event::customer_id>,
                                         sq::column<"total_cents", &order_event::total_cents>,
                                         sq::column<"event_seq", &order_event::event_seq>>> {};

/// Distinct orders: the table holds exactly this many rows, all of them seeded.
inline constexpr std::int64_t orders = 1024;
/// Records a case consumes before its database is rebuilt (a round).
inline constexpr std::int64_t round_records = std::int64_t{1} << 17;

using log_t = co::memory::log<order_event, co::Synced>;
using reader_t = log_t::reader;

/// The seeded records (offsets 0 .. orders-1, already in the database) and one round after them.
/// Record i is order i % orders, so every measured record updates a row with a newer offset.
inline const log_t& shared_log() {
  static const log_t log = [] {
    log_t l;
    for (std::int64_t i = 0; i < orders + round_records; ++i)
      l.append(order_event{i % orders, 100 + i % 97, i, i / orders + 1});
    return l;
  }();
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
    "\"source_offset\" INTEGER NOT NULL, PRIMARY KEY (\"order_id\"))";
inline constexpr const char* create_positions =
    "CREATE TABLE IF NOT EXISTS \"commit_order_positions\" (stream TEXT PRIMARY KEY NOT NULL, "
    "position INTEGER, owner_epoch INTEGER NOT NULL DEFAULT 0)";
inline constexpr const char* upsert_order =
    "INSERT INTO \"orders_flat\" (\"order_id\", \"customer_id\", \"total_cents\", \"event_seq\", "
    "\"source_offset\") VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (\"order_id\") DO UPDATE SET "
    "\"customer_id\" = excluded.\"customer_id\", \"total_cents\" = excluded.\"total_cents\", "
    "\"event_seq\" = excluded.\"event_seq\", \"source_offset\" = excluded.\"source_offset\" WHERE "
    "\"orders_flat\".\"source_offset\" < excluded.\"source_offset\"";
inline constexpr const char* load_position =
    "SELECT position, owner_epoch FROM \"commit_order_positions\" WHERE stream = ?1";
// Fenced: the write only lands while the row's owner epoch is the writer's.
inline constexpr const char* store_position =
    "INSERT INTO \"commit_order_positions\" (stream, position, owner_epoch) VALUES (?1, ?2, ?3) "
    "ON CONFLICT (stream) DO UPDATE SET position = excluded.position WHERE "
    "\"commit_order_positions\".owner_epoch = excluded.owner_epoch";
// Recovery under TransactionalPosition claims the row first, for the epoch one above the row's
// (no owner epoch is configured: the consumer started last owns the position); an owner with a
// newer epoch keeps it, and this consumer learns it is fenced.
inline constexpr const char* claim_position =
    "INSERT INTO \"commit_order_positions\" (stream, position, owner_epoch) VALUES (?1, NULL, ?2) "
    "ON CONFLICT (stream) DO UPDATE SET owner_epoch = excluded.owner_epoch WHERE "
    "\"commit_order_positions\".owner_epoch <= excluded.owner_epoch";
inline constexpr const char* watermark = "SELECT MAX(\"source_offset\") FROM \"orders_flat\"";
inline constexpr const char* stream = "default";
}  // namespace sql

// ---- the seeded database --------------------------------------------------------------------

[[noreturn, gnu::cold, gnu::noinline]] inline void fail(sqlite3* db, int rc, const char* doing) {
  throw std::runtime_error(std::string("sqlite_bench: ") + doing + ": " +
                           (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

/// Writes the tables, `orders` rows (offsets 0 .. orders-1) and the position row (`orders`)
/// into a new WAL database, then closes it. Not part of any measurement or trace.
inline void seed(const std::filesystem::path& file) {
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
    run(sql::create_orders);
    run(sql::create_positions);
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
      rc = sqlite3_step(s);
      sqlite3_reset(s);
      if (rc != SQLITE_DONE) {
        sqlite3_finalize(s);
        fail(db, rc, "seed: insert");
      }
    }
    sqlite3_finalize(s);
    run(("INSERT INTO \"commit_order_positions\" (stream, position, owner_epoch) VALUES "
         "('default', " +
         std::to_string(orders) + ", 0)")
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
  seeded_database() { seed(file); }
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

/// The position row's statements on one connection.
struct raw_positions {
  raw_statement load;
  raw_statement store;
  raw_statement claim;

  explicit raw_positions(raw_connection& c)
      : load(after(c, sql::create_positions), sql::load_position)
      , store(c.get(), sql::store_position)
      , claim(c.get(), sql::claim_position) {}

  /// The owner epoch this connection writes positions as (0 until it claims the row).
  std::int64_t epoch = 0;

  /// The owner epoch the row holds now (0: no row).
  std::int64_t owner(sqlite3* db) {
    sqlite3_bind_text(load.get(), 1, sql::stream, 7, SQLITE_STATIC);
    const int rc = sqlite3_step(load.get());
    const std::int64_t e = rc == SQLITE_ROW ? sqlite3_column_int64(load.get(), 1) : 0;
    sqlite3_reset(load.get());
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      fail(db, rc, sql::load_position);
    return e;
  }

  /// Makes `e` the row's owner (and the epoch of every later position); false when a newer
  /// owner holds it.
  bool claim_ownership(sqlite3* db, std::int64_t e) {
    epoch = e;
    sqlite3_bind_text(claim.get(), 1, sql::stream, 7, SQLITE_STATIC);
    sqlite3_bind_int64(claim.get(), 2, e);
    claim.run();
    return sqlite3_changes(db) != 0;
  }

  /// The stored position (nullopt: none).
  std::optional<std::int64_t> read(sqlite3* db) {
    sqlite3_bind_text(load.get(), 1, sql::stream, 7, SQLITE_STATIC);
    const int rc = sqlite3_step(load.get());
    std::optional<std::int64_t> stored;
    if (rc == SQLITE_ROW && sqlite3_column_type(load.get(), 0) != SQLITE_NULL)
      stored = sqlite3_column_int64(load.get(), 0);
    sqlite3_reset(load.get());
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
      fail(db, rc, sql::load_position);
    return stored;
  }

  /// The fenced upsert: a row owned by another epoch changes nothing, and that is a failure.
  void write(sqlite3* db, std::int64_t position) {
    sqlite3_bind_text(store.get(), 1, sql::stream, 7, SQLITE_STATIC);
    sqlite3_bind_int64(store.get(), 2, position);
    sqlite3_bind_int64(store.get(), 3, epoch);
    store.run();
    if (sqlite3_changes(db) == 0) [[unlikely]]
      throw std::runtime_error("sqlite_bench: fenced: another owner holds the position row");
  }
};

template <policy_id P, sync_id S, flaw F = flaw::none>
struct handwritten_case {
  static constexpr bool transactional = P == policy_id::transactional_position;

  reader_t reader = shared_log().make_reader();
  std::size_t batch;
  // The sink's connection: the rows (and, under TransactionalPosition, the position).
  raw_connection rows;
  raw_statement upsert{after(rows, sql::create_orders), sql::upsert_order};
  raw_positions rows_positions{rows};
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
        // the position and the one before is fenced at its next write.
        const bool owned =
            rows_positions.claim_ownership(rows.get(), rows_positions.owner(rows.get()) + 1);
        stored = rows_positions.read(rows.get());
        if (!owned)
          throw std::runtime_error("sqlite_bench: fenced: a newer owner holds the position row");
        raw_statement max(rows.get(), sql::watermark);
        if (sqlite3_step(max.get()) == SQLITE_ROW &&
            sqlite3_column_type(max.get(), 0) != SQLITE_NULL &&
            !(stored && *stored > sqlite3_column_int64(max.get(), 0)))
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
      // The store's set-up on the shared connection: its table, whatever the sink created.
      rows.exec(sql::create_positions);
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
        store_positions->write(store->get(), end);
      } else {
        rows_positions.write(rows.get(), end);
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
      upsert.run();
    }
  }
};

}  // namespace sqlite_bench
