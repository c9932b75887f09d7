// commit_order/adapters/sqlite/sink.hpp — sinks that write event rows into a SQLite table.
//
//   sqlite::guarded_upsert_sink<D>  INSERT ... ON CONFLICT (<key>) DO UPDATE SET ...
//                                   WHERE <table>.source_offset < excluded.source_offset
//                                   Idempotent, OffsetGuarded, Transactional
//   sqlite::upsert_sink<D>          the same upsert without the WHERE: last writer wins
//                                   Idempotent, Transactional
//   sqlite::append_sink<D>          plain INSERT, every write a new row
//                                   Transactional only: replays become duplicate rows
// plus the durability of its durability mode, the last template parameter: Synced under the
// default wal_full (see connection.hpp and docs/adapters.md for every journal x synchronous
// combination).
//
// Every sink writes through one statement prepared at construction and reused for every row;
// BEGIN IMMEDIATE, COMMIT and ROLLBACK are prepared once too. Writing a row, beginning,
// committing and storing the position allocate nothing: a message is built only when a call
// has failed. Failures are typed as the record's (record_error) or the world's
// (infrastructure_error, rollback_error): see connection.hpp.
// Outside a transaction each apply() is its own durable transaction; between begin() and
// commit(), rows and the stream's position (see position_table.hpp) commit together — or, on
// rollback(), neither does. The position row carries the owner's epoch (fencing_sink): after
// claim(e), every position this sink stores is conditional on the row still being owned by e.
//
// A data table belongs to one stream partition: its rows carry their source offset but not
// their partition, so the watermark, the offset guard and recovery's invariant check compare
// offsets of that one partition. Give each partition its own table.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/position_table.hpp"
#include "commit_order/adapters/sqlite/table.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::sqlite {

// ---- write modes ---------------------------------------------------------------------------

/// Keyed upsert that only wins when the incoming source offset is newer than the row's.
struct guarded_upsert_mode final {
  static constexpr bool keyed = true;
  static constexpr bool guarded = true;
};
/// Keyed upsert, last writer wins: a replay rewrites rows with older data until it catches up.
struct upsert_mode final {
  static constexpr bool keyed = true;
  static constexpr bool guarded = false;
};
/// Plain INSERT into a table without a uniqueness constraint.
struct append_mode final {
  static constexpr bool keyed = false;
  static constexpr bool guarded = false;
};

template <class M>
concept write_mode = std::is_same_v<M, guarded_upsert_mode> || std::is_same_v<M, upsert_mode> ||
    std::is_same_v<M, append_mode>;

struct sink_options final {
  /// The key of this sink's row in the position table: one per stream partition.
  std::string stream = "default";
  std::string position_table = "commit_order_positions";
  /// How long a write waits for another connection's lock before failing with SQLITE_BUSY (an
  /// infrastructure_error).
  std::chrono::milliseconds busy_timeout{5000};
  /// CREATE TABLE IF NOT EXISTS for the data table and the position table.
  bool create_tables = true;
};

namespace detail {

template <class Mode, class Durability>
struct mode_capabilities;
template <class Durability>
struct mode_capabilities<guarded_upsert_mode, Durability> {
  using type = commit_order::capabilities<Idempotent, OffsetGuarded, Transactional, Durability>;
};
template <class Durability>
struct mode_capabilities<upsert_mode, Durability> {
  using type = commit_order::capabilities<Idempotent, Transactional, Durability>;
};
template <class Durability>
struct mode_capabilities<append_mode, Durability> {
  using type = commit_order::capabilities<Transactional, Durability>;
};

// Only keyed sinks have a key: an append sink must not look like it dedups (rule R8 and the
// `sink_key_t` trait read this alias).
template <class D, bool Keyed>
struct key_alias {};
template <class D>
struct key_alias<D, true> {
  using key_type = typename D::keys::key_type;
};

template <class D, class Mode>
std::string create_table_sql() {
  using cols = columns_of<typename D::keys, typename D::values>;
  std::string sql =
      concat("CREATE TABLE IF NOT EXISTS ", quote_identifier(D::name), " (", cols::definitions(),
             ", ", quote_identifier(D::offset_column), " INTEGER NOT NULL");
  if constexpr (Mode::keyed)
    sql.append(concat(", PRIMARY KEY (", cols::key_names(), ")"));
  sql.append(")");
  return sql;
}

template <class D, class Mode>
std::string write_sql() {
  using cols = columns_of<typename D::keys, typename D::values>;
  const std::string offset = quote_identifier(D::offset_column);
  std::string sql = concat("INSERT INTO ", quote_identifier(D::name), " (", cols::all_names(), ", ",
                           offset, ") VALUES (");
  for (std::size_t i = 1; i <= cols::count + 1; ++i)
    sql.append(concat(i == 1 ? "?" : ", ?", std::to_string(i)));
  sql.append(")");
  if constexpr (Mode::keyed) {
    const std::string updates = cols::updates();
    sql.append(concat(" ON CONFLICT (", cols::key_names(), ") DO UPDATE SET ", updates,
                      updates.empty() ? "" : ", ", offset, " = excluded.", offset));
    if constexpr (Mode::guarded)
      sql.append(concat(" WHERE ", quote_identifier(D::name), ".", offset, " < excluded.", offset));
  }
  return sql;
}

}  // namespace detail

/// A sink writing rows of table D in write mode Mode, with the durability of its durability
/// mode (wal_full unless told otherwise). Not final: a test harness may derive from it to pace
/// or count writes without re-declaring anything.
template <describes_table D, write_mode Mode = guarded_upsert_mode,
          durability_mode Durability = wal_full>
class table_sink : public detail::key_alias<D, Mode::keyed> {
 public:
  using row_type = typename D::event_type;
  using description = D;
  using mode = Mode;
  using capabilities =
      typename detail::mode_capabilities<Mode, typename Durability::durability>::type;

  /// Opens (creating if needed) the database `file` in the durability mode, and the tables
  /// unless told otherwise. Throws durability_mismatch when SQLite does not run that mode.
  explicit table_sink(const std::filesystem::path& file, sink_options options = {})
      : db_(connection::open<Durability>(file, {options.busy_timeout})) {
    if (options.create_tables)
      db_.exec(detail::create_table_sql<D, Mode>());
    positions_.emplace(db_, options.position_table, options.stream, options.create_tables);
    write_.emplace(db_.prepare(detail::write_sql<D, Mode>()));
    watermark_.emplace(
        db_.prepare(detail::concat("SELECT MAX(", detail::quote_identifier(D::offset_column),
                                   ") FROM ", detail::quote_identifier(D::name))));
    begin_.emplace(db_.prepare("BEGIN IMMEDIATE"));
    commit_.emplace(db_.prepare("COMMIT"));
    rollback_.emplace(db_.prepare("ROLLBACK"));
  }

  table_sink(const table_sink&) = delete;
  table_sink& operator=(const table_sink&) = delete;

  /// A sink destroyed inside a transaction (an exception unwinding past the loop) leaves
  /// nothing half-written behind: it rolls back, and if even that fails, closing the
  /// connection discards the transaction.
  ~table_sink() {
    try {
      rollback();
    } catch (...) {
      // Nothing to report to: closing the connection (next) discards the open transaction.
    }
  }

  /// Writes the row of one record. `absorbed` when the offset guard kept a newer row.
  write_outcome apply(offset source_offset, const row_type& row) {
    if (broken_ != SQLITE_OK) [[unlikely]]
      throw_broken();
    statement& s = *write_;
    reset_on_exit reset(s);
    // Every parameter is bound for every row (the statement keeps no stale string binding).
    detail::columns_of<typename D::keys, typename D::values>::bind(s, row);
    s.bind(static_cast<int>(detail::columns_of<typename D::keys, typename D::values>::count) + 1,
           source_offset.value());
    s.step();
    if constexpr (Mode::guarded) {
      // The guarded upsert's WHERE was false: the row holds a newer (or the same) offset.
      if (db_.changes() == 0)
        return write_outcome::absorbed;
    }
    return write_outcome::applied;
  }

  // ---- transactions ------------------------------------------------------------------------

  /// BEGIN IMMEDIATE: the write lock is taken now, so two owners of one database queue here
  /// (up to the busy timeout, then SQLITE_BUSY: an infrastructure_error) instead of failing
  /// when one upgrades a read lock in the middle.
  void begin() {
    if (broken_ != SQLITE_OK) [[unlikely]]
      throw_broken();
    if (db_.in_transaction())
      throw std::logic_error("commit_order::sqlite: begin() inside an open transaction");
    statement& s = *begin_;
    reset_on_exit reset(s);
    try {
      s.step();
    } catch (const infrastructure_error&) {
      // SQLite checks for an interrupt as a statement ends, so BEGIN can fail with its
      // transaction open: nobody would roll it back (begin() failed), and the next begin()
      // would find it. Close it; if even that fails, rollback() marks the sink unusable.
      if (db_.in_transaction())
        rollback();
      throw;
    }
  }

  void commit() {
    if (!db_.in_transaction())
      throw std::logic_error("commit_order::sqlite: commit() without begin()");
    {
      statement& s = *commit_;
      reset_on_exit reset(s);
      s.step();
    }
    // A claim counts once it is durable: after a rollback the row still names the old owner.
    if (pending_claim_)
      claimed_ = std::exchange(pending_claim_, std::nullopt);
  }

  /// Undoes everything since begin(). A no-op outside a transaction: SQLite itself ends the
  /// transaction after some failures (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY in
  /// a statement, an interrupt), and then there is nothing left to undo. If ROLLBACK fails and
  /// SQLite reports the transaction ended anyway (sqlite3_get_autocommit), the sink stays
  /// usable; if the transaction is still open, throws `rollback_error` and refuses every later
  /// write, which would otherwise land in a transaction that never commits.
  void rollback() {
    pending_claim_.reset();
    if (!db_.in_transaction())
      return;
    const int rc = rollback_->step_code();
    if (rc == SQLITE_DONE || !db_.in_transaction())
      return;
    broken_ = rc;
    throw rollback_error(
        rc, detail::concat("ROLLBACK failed: ", sqlite3_errmsg(db_.get()), " (", sqlite3_errstr(rc),
                           "); the transaction is still open"));
  }

  // ---- the position, inside the transaction ------------------------------------------------

  [[nodiscard]] std::optional<position> load_position() const { return positions_->load().stored; }

  /// Stages `p` in the open transaction, as the epoch this sink claimed (0 if it never did).
  void store_position(position p) {
    store_position(p, pending_claim_.value_or(claimed_.value_or(epoch{0})));
  }

  /// Stages `p` while the position row is still owned by `e`; throws `fenced` otherwise (the
  /// caller rolls back, so a stale owner's rows go with it).
  void store_position(position p, epoch e) {
    require_transaction("store_position()");
    positions_->store(p, e);
  }

  /// Inside a transaction: makes `e` the owner of the stream and returns its stored position;
  /// throws `fenced` when a newer owner holds it. Later store_position(p) calls use `e`.
  std::optional<position> claim(epoch e) {
    require_transaction("claim()");
    auto stored = positions_->claim(e);
    pending_claim_ = e;
    return stored;
  }

  /// Inside a transaction: raises the stream's owner epoch by one (a consumer given no epoch of
  /// its own: the last one started owns the position, the one before is fenced at its next
  /// write). BEGIN IMMEDIATE holds the write lock, so reading the epoch and raising it is one
  /// step for every other connection.
  claimed claim_next() {
    require_transaction("claim_next()");
    const epoch e = positions_->load().owner.next();
    auto stored = claim(e);
    return claimed{e, stored};
  }

  /// The epoch of the last claim() whose transaction committed.
  [[nodiscard]] std::optional<epoch> claimed_epoch() const noexcept { return claimed_; }

  /// The owner epoch the position row holds now.
  [[nodiscard]] epoch owner_epoch() const { return positions_->load().owner; }

  // ---- progress ----------------------------------------------------------------------------

  /// The applied watermark: the highest source offset present in the table.
  [[nodiscard]] std::optional<offset> applied_watermark() const {
    statement& s = *watermark_;
    reset_on_exit reset(s);
    if (!s.step() || s.column_is_null(0))
      return std::nullopt;
    return offset{s.column_int64(0)};
  }

  /// False after a ROLLBACK that failed and left the transaction open: the sink refuses every
  /// write until it is destroyed and reopened.
  [[nodiscard]] bool usable() const noexcept { return broken_ == SQLITE_OK; }

  /// The connection, for reading the table (and for tests).
  [[nodiscard]] connection& database() noexcept { return db_; }
  /// The prepared write statement (its run count shows it is reused).
  [[nodiscard]] const statement& write_statement() const noexcept { return *write_; }

 private:
  void require_transaction(const char* what) const {
    if (broken_ != SQLITE_OK) [[unlikely]]
      throw_broken();
    // Outside a transaction the position would commit on its own, apart from the rows it
    // vouches for: exactly the two-write window this sink exists to close.
    if (!db_.in_transaction())
      throw std::logic_error(
          detail::concat("commit_order::sqlite: ", what, " outside a transaction"));
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_broken() const {
    throw infrastructure_error(
        broken_,
        detail::concat("the sink is unusable: a ROLLBACK failed (", sqlite3_errstr(broken_),
                       ") and left its transaction open -- destroy and reopen the sink"));
  }

  connection db_;
  mutable std::optional<detail::position_table> positions_;
  std::optional<statement> write_;
  mutable std::optional<statement> watermark_;
  std::optional<statement> begin_;
  std::optional<statement> commit_;
  std::optional<statement> rollback_;
  std::optional<epoch> claimed_;
  std::optional<epoch> pending_claim_;  // claimed in the open transaction
  int broken_ = SQLITE_OK;              // the code of a ROLLBACK that left the transaction open
};

/// Idempotent, OffsetGuarded, Transactional: fit for every policy.
template <describes_table D, durability_mode Durability = wal_full>
using guarded_upsert_sink = table_sink<D, guarded_upsert_mode, Durability>;
/// Idempotent, Transactional, not OffsetGuarded: AtLeastOnce, AutoCommit; never
/// TransactionalPosition (rule R5).
template <describes_table D, durability_mode Durability = wal_full>
using upsert_sink = table_sink<D, upsert_mode, Durability>;
/// Not Idempotent: AtMostOnce only (rules R1, R3, R5).
template <describes_table D, durability_mode Durability = wal_full>
using append_sink = table_sink<D, append_mode, Durability>;

}  // namespace commit_order::sqlite
