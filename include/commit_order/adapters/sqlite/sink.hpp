// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/sink.hpp — sinks that write event rows into a SQLite table.
//
//   sqlite::guarded_upsert_sink<D>  INSERT ... ON CONFLICT (<key>) DO UPDATE SET ...
//                                   WHERE t.source_partition = excluded.source_partition
//                                     AND t.source_offset < excluded.source_offset
//                                   Idempotent, OffsetGuarded, PartitionScoped, Transactional
//   sqlite::version_guarded_sink<D, &E::version>
//                                   ... DO UPDATE SET ... WHERE t.version < excluded.version
//                                   Idempotent, VersionGuarded<&E::version>, Transactional
//   sqlite::upsert_sink<D>          the same upsert without the WHERE: last writer wins
//                                   Idempotent, Transactional
//   sqlite::append_sink<D>          plain INSERT, every write a new row
//                                   Transactional only: replays become duplicate rows
// plus the durability of its durability mode, the last template parameter: Synced under the
// default wal_full (see connection.hpp and docs/adapters.md for every journal x synchronous
// combination).
//
// One table is shared by every partition of a stream: each row carries the partition and the
// offset it came from (D::partition_column, D::offset_column). The guarded upsert compares
// offsets within a partition only; a key whose row came from another partition (the topic was
// repartitioned) is `key_moved_partition`, never absorbed nor overwritten — found only when the
// upsert changed no row, by one lookup of that key, so the write path stays one statement. The
// version guard compares a per-key version from the producer instead, which survives a
// repartition.
//
// Every sink writes through one statement prepared at construction and reused for every row;
// BEGIN IMMEDIATE, COMMIT and ROLLBACK are prepared once too. Writing a row, beginning,
// committing and storing a position allocate nothing: a message is built only when a call
// has failed. Failures are typed as the record's (record_error) or the world's
// (infrastructure_error, rollback_error): see connection.hpp.
// Outside a transaction each apply() is its own durable transaction; between begin() and
// commit(), rows and the positions of the partitions they came from (see position_table.hpp)
// commit together — or, on rollback(), neither does. Each position row carries the epoch of
// its partition's owner (partitioned_fencing_sink): after claim(k, e), every position this
// sink stores for k is conditional on the row still being owned by e. The single-partition
// calls (apply(o, row), claim(e), store_position(p), ...) are partition 0's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/adapters/detail/write_modes.hpp"
#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/layout.hpp"
#include "commit_order/adapters/sqlite/position_table.hpp"
#include "commit_order/adapters/sqlite/table.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::sqlite {

// ---- write modes: commit_order/adapters/detail/write_modes.hpp ------------------------------

using adapters::append_mode;
using adapters::guarded_upsert_mode;
using adapters::upsert_mode;
using adapters::version_guarded_mode;
using adapters::write_mode;

struct sink_options final {
  /// The consumer the positions belong to (a consumer group, a job): the first part of the key
  /// of the position rows.
  std::string stream = "default";
  /// The source the stream reads (a topic's name; empty for a source without topics): the
  /// second part. The third is the partition.
  std::string topic{};
  std::string position_table = std::string(detail::default_position_table);
  /// Where the stream's era and partition count are kept (one row per stream and topic).
  std::string stream_table = std::string(detail::default_stream_table);
  /// Where every claim is recorded: partition, epoch, member, time (see layout.hpp).
  std::string claim_table = std::string(detail::default_claim_table);
  /// Who this sink's claims name (a host name and process id, a group member id): who owned
  /// what, for the operator. Empty: NULL.
  std::string member{};
  /// How long a write waits for another connection's lock before failing with SQLITE_BUSY (an
  /// infrastructure_error).
  std::chrono::milliseconds busy_timeout{5000};
  /// CREATE TABLE IF NOT EXISTS for the data table (and its partition index), the position,
  /// stream and claim tables.
  bool create_tables = true;
};

namespace detail {

using adapters::detail::key_alias;
using adapters::detail::mode_capabilities;

/// The column a version guard compares: the one of D's value columns that holds the member.
template <class D, class Mode>
struct version_column {
  static constexpr std::string_view name{};
};
template <class D, auto Member>
struct version_column<D, version_guarded_mode<Member>> {
  using found = column_of<Member, typename D::keys, typename D::values>;
  static_assert(part_rules::require<part_rules::sqlite_version_in_key, !found::in_key>());
  static_assert(part_rules::require<part_rules::sqlite_version_not_a_column,
                                    (found::in_key || !found::name.empty())>());
  using value_type = typename member_pointer_traits<decltype(Member)>::value;
  static_assert(part_rules::require<part_rules::sqlite_version_not_a_number,
                                    (std::is_arithmetic_v<value_type> &&
                                     !std::is_same_v<value_type, bool>)>());
  static constexpr std::string_view name = found::name;
};

template <class D, class Mode>
std::string create_table_sql() {
  using cols = columns_of<typename D::keys, typename D::values>;
  std::string sql =
      concat("CREATE TABLE IF NOT EXISTS ", quote_identifier(D::name), " (", cols::definitions(),
             ", ", quote_identifier(D::offset_column), " INTEGER NOT NULL, ",
             quote_identifier(D::partition_column), " INTEGER NOT NULL");
  if constexpr (Mode::keyed)
    sql.append(concat(", PRIMARY KEY (", cols::key_names(), ")"));
  sql.append(")");
  return sql;
}

/// The write statement. Parameters: the columns (keys first), then the offset, then the
/// partition.
template <class D, class Mode>
std::string write_sql() {
  using cols = columns_of<typename D::keys, typename D::values>;
  const std::string table = quote_identifier(D::name);
  const std::string offset = quote_identifier(D::offset_column);
  const std::string partition = quote_identifier(D::partition_column);
  std::string sql = concat("INSERT INTO ", table, " (", cols::all_names(), ", ", offset, ", ",
                           partition, ") VALUES (");
  for (std::size_t i = 1; i <= cols::count + 2; ++i)
    sql.append(concat(i == 1 ? "?" : ", ?", std::to_string(i)));
  sql.append(")");
  if constexpr (Mode::keyed) {
    const std::string updates = cols::updates();
    sql.append(concat(" ON CONFLICT (", cols::key_names(), ") DO UPDATE SET ", updates,
                      updates.empty() ? "" : ", ", offset, " = excluded.", offset, ", ", partition,
                      " = excluded.", partition));
    if constexpr (Mode::partition_scoped) {
      // Offsets of two partitions say nothing about which record is newer: the guard compares
      // them only within the row's partition, and a row of another partition is never replaced.
      sql.append(concat(" WHERE ", table, ".", partition, " = excluded.", partition, " AND ", table,
                        ".", offset, " < excluded.", offset));
    } else if constexpr (Mode::version_guarded) {
      const std::string version = quote_identifier(version_column<D, Mode>::name);
      sql.append(concat(" WHERE ", table, ".", version, " < excluded.", version));
    }
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
  using columns = detail::columns_of<typename D::keys, typename D::values>;
  static constexpr int offset_parameter = static_cast<int>(columns::count) + 1;
  static constexpr int partition_parameter = static_cast<int>(columns::count) + 2;
  // Instantiated here so a version guard on a column the table lacks fails at the sink's type.
  static constexpr std::string_view version_column_name = detail::version_column<D, Mode>::name;

 public:
  using row_type = typename D::event_type;
  using description = D;
  using mode = Mode;
  using capabilities =
      typename detail::mode_capabilities<Mode, typename Durability::durability>::type;
  /// What this code gives: a derived sink that restates `capabilities` keeps it (rule S28).
  using implemented_capabilities = capabilities;

  /// Opens (creating if needed) the database `file` in the durability mode, and the tables
  /// unless told otherwise. Throws durability_mismatch when SQLite does not run that mode, and
  /// outdated_layout when the file was written by the adapter before partitions.
  explicit table_sink(const std::filesystem::path& file, sink_options options = {})
      : db_(connection::open<Durability>(file, {options.busy_timeout})) {
    // Both before anything is created: a refused file is left as it was.
    detail::check_table_layout<D>(db_);
    detail::check_positions_layout(
        db_, detail::require_identifier(options.position_table, "position table name"),
        options.topic);
    if (options.create_tables) {
      db_.exec(detail::create_table_sql<D, Mode>());
      if constexpr (D::partition_index)
        db_.exec(detail::partition_index_definition<D>());
    }
    positions_.emplace(db_, options.position_table, options.stream, options.topic,
                       options.create_tables, std::string(D::name));
    claim_log_.emplace(db_, options.claim_table, options.stream, options.topic,
                       std::move(options.member), options.create_tables);
    streams_.emplace(db_, options.stream_table, std::move(options.stream), std::move(options.topic),
                     options.create_tables);
    write_.emplace(db_.prepare(detail::write_sql<D, Mode>()));
    const std::string table = detail::quote_identifier(D::name);
    const std::string partition = detail::quote_identifier(D::partition_column);
    const std::string offset = detail::quote_identifier(D::offset_column);
    // One seek into the (partition, offset) index.
    watermark_.emplace(db_.prepare(
        detail::concat("SELECT MAX(", offset, ") FROM ", table, " WHERE ", partition, " = ?1")));
    if constexpr (Mode::partition_scoped)
      stored_by_key_.emplace(db_.prepare(detail::concat(
          "SELECT ", partition, ", ", offset, " FROM ", table, " WHERE ", columns::key_match())));
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

  /// Writes the row of one record of partition `k`. `absorbed` when the guard kept a newer row
  /// (a replay); throws `key_moved_partition` (PartitionScoped) when the key's row came from
  /// another partition — also one written earlier in the same transaction.
  write_outcome apply(partition_id k, offset source_offset, const row_type& row) {
    if (broken_ != SQLITE_OK) [[unlikely]]
      throw_broken();
    {
      statement& s = *write_;
      reset_on_exit reset(s);
      // Every parameter is bound for every row (the statement keeps no stale string binding).
      columns::bind(s, row);
      s.bind(offset_parameter, source_offset.value());
      s.bind(partition_parameter, k.value());
      s.step();
    }
    if constexpr (Mode::guarded) {
      // The guarded upsert's WHERE was false: the rare path (a replay, or a moved key).
      if (db_.changes() == 0) [[unlikely]]
        return not_written(k, source_offset, row);
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
    if (!pending_claims_.empty()) [[unlikely]]
      settle_claims();
  }

  /// Undoes everything since begin(). A no-op outside a transaction: SQLite itself ends the
  /// transaction after some failures (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY in
  /// a statement, an interrupt), and then there is nothing left to undo. If ROLLBACK fails and
  /// SQLite reports the transaction ended anyway (sqlite3_get_autocommit), the sink stays
  /// usable; if the transaction is still open, throws `rollback_error` and refuses every later
  /// write, which would otherwise land in a transaction that never commits.
  void rollback() {
    pending_claims_.clear();
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

  // ---- positions, one per partition, inside the transaction --------------------------------

  [[nodiscard]] std::optional<position> load_position(partition_id k = partition_id{0}) const {
    return positions_->load(k).stored;
  }

  /// Stages `p` for partition `k` in the open transaction, as the epoch this sink claimed k at
  /// (0 if it never did).
  void store_position(partition_id k, position p) { store_position(k, p, my_epoch(k)); }

  /// Stages `p` for partition `k` while its row is still owned by `e`; throws `fenced`
  /// otherwise (the caller rolls back, so a stale owner's rows go with it).
  void store_position(partition_id k, position p, epoch e) {
    require_transaction("store_position()");
    positions_->store(k, p, e);
  }

  /// The same, with the fingerprint of the record `p` follows (fingerprinting_sink): kept in
  /// the row, and returned by the next claim of `k`, so that the record can be checked to be
  /// still the one at `p - 1` (a topic recreated under its name reuses every offset).
  void store_position(partition_id k, position p, epoch e, std::uint64_t fingerprint) {
    require_transaction("store_position()");
    positions_->store(k, p, e, fingerprint);
  }

  /// The fingerprint stored with the position the last claim or claim_next returned (none when
  /// it was stored without one).
  [[nodiscard]] std::optional<std::uint64_t> claimed_fingerprint() const noexcept {
    return positions_->claimed_fingerprint();
  }

  /// Inside a transaction: makes `e` the owner of partition `k` and returns its stored
  /// position; throws `fenced` when a newer owner holds it. Later store_position(k, p) calls
  /// use `e`.
  std::optional<position> claim(partition_id k, epoch e) {
    require_transaction("claim()");
    auto stored = positions_->claim(k, e);
    claim_log_->record(k, e);
    note_claim(k, e);
    return stored;
  }

  /// Inside a transaction: raises partition `k`'s owner epoch by one, in one statement (a
  /// consumer given no epoch of its own: the last one started owns the partition, the one
  /// before is fenced at its next write).
  claimed claim_next(partition_id k) {
    require_transaction("claim_next()");
    const claimed c = positions_->claim_next(k);
    claim_log_->record(k, c.owner);
    note_claim(k, c.owner);
    return c;
  }

  /// Binds the position rows to the source they are read from as well as to the table (the
  /// pipeline calls it with the source's identity, before the first claim).
  void bind_source(const std::string& identity) { positions_->bind_source(identity); }

  /// The data table a position of this sink's records vouches for (table_bound_sink): a
  /// position store of the pipeline is bound to it too.
  [[nodiscard]] std::string bound_table() const { return std::string(D::name); }

  /// The database file of that table (database_bound_sink): a position store in another file
  /// names it in its binding.
  [[nodiscard]] std::string bound_database() const { return db_.file_name(); }

  /// The epoch of the last claim of partition `k` whose transaction committed.
  [[nodiscard]] std::optional<epoch> claimed_epoch(partition_id k = partition_id{0}) const {
    for (const auto& [partition, e] : claims_)
      if (partition == k)
        return e;
    return std::nullopt;
  }

  /// The owner epoch partition `k`'s position row holds now.
  [[nodiscard]] epoch owner_epoch(partition_id k = partition_id{0}) const {
    return positions_->load(k).owner;
  }

  // ---- what the owners of a stream share (stream_registry) ---------------------------------

  /// The stream's era: the high half of a group's epochs (epoch::of), raised only by
  /// bump_era() — see stream_admin in admin.hpp for the operator's view of it.
  [[nodiscard]] std::int64_t era() const { return streams_->era(); }

  /// Inside a transaction (the pipeline's claim): records `n` at the first claim; a different
  /// count later throws `partition_count_changed` — keys may have moved between partitions,
  /// and an offset guard would compare offsets of unrelated partitions. A version-guarded sink
  /// records the new count instead: its guard does not depend on partitions.
  void check_partition_count(std::size_t n) {
    require_transaction("check_partition_count()");
    streams_->record_partition_count(n, Mode::version_guarded);
  }

  /// The partition count recorded at the first claim (none before it).
  [[nodiscard]] std::optional<std::size_t> partition_count() const {
    return streams_->partition_count();
  }

  /// The operator's way out when a consumer group was deleted and recreated (its generations
  /// restarted below the stored epochs, so every claim is fenced): raises the era by one and
  /// returns it. Never automatic. Outside a transaction (std::logic_error inside one: a
  /// rollback of the unit would silently take the operator's act back); commits on its own.
  std::int64_t bump_era() {
    require_no_transaction("bump_era()");
    return streams_->bump_era();
  }

  /// The operator's acknowledgement of a repartitioned stream, after draining its old
  /// partitions: the next claim records the count it sees. Outside a transaction.
  void accept_partition_count() {
    require_no_transaction("accept_partition_count()");
    streams_->set_partition_count(std::nullopt);
  }
  /// The same, naming the new count: a claim that sees another one still fails under the
  /// offset guard (the version guard records whatever count a claim sees).
  void accept_partition_count(std::size_t n) {
    require_no_transaction("accept_partition_count(n)");
    streams_->set_partition_count(n);
  }

  // ---- progress ----------------------------------------------------------------------------

  /// The applied watermark of partition `k`: the highest source offset of k in the table (one
  /// seek into the (partition, offset) index).
  [[nodiscard]] std::optional<offset> applied_watermark(partition_id k = partition_id{0}) const {
    statement& s = *watermark_;
    reset_on_exit reset(s);
    s.bind(1, k.value());
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
  // The guard kept the stored row. Within its partition that is a replay, absorbed; from
  // another partition it is a moved key, which neither an absorb (losing the newer record) nor
  // an overwrite (losing the newer row) would get right. Cold: one lookup, only here.
  [[gnu::cold, gnu::noinline]] write_outcome not_written(partition_id k, offset source_offset,
                                                         const row_type& row) {
    if constexpr (Mode::partition_scoped) {
      statement& s = *stored_by_key_;
      reset_on_exit reset(s);
      columns::bind_key(s, row);
      if (s.step()) {
        const partition_id stored{static_cast<partition_id::value_type>(s.column_int64(0))};
        if (stored != k)
          throw key_moved_partition(columns::key_text(row), stored, offset{s.column_int64(1)}, k,
                                    source_offset);
      }
    } else {
      (void)k;
      (void)source_offset;
      (void)row;
    }
    return write_outcome::absorbed;
  }

  // The epoch store_position(k, p) writes as: claimed in this transaction, or committed.
  epoch my_epoch(partition_id k) const {
    for (const auto& [partition, e] : pending_claims_)
      if (partition == k)
        return e;
    return claimed_epoch(k).value_or(epoch{0});
  }

  void note_claim(partition_id k, epoch e) {
    for (auto& [partition, pending] : pending_claims_) {
      if (partition == k) {
        pending = e;
        return;
      }
    }
    pending_claims_.emplace_back(k, e);
  }

  void settle_claims() {
    for (const auto& [k, e] : pending_claims_) {
      const auto it = std::ranges::find(claims_, k, &std::pair<partition_id, epoch>::first);
      if (it != claims_.end())
        it->second = e;
      else
        claims_.emplace_back(k, e);
    }
    pending_claims_.clear();
  }

  void require_transaction(const char* what) const {
    if (broken_ != SQLITE_OK) [[unlikely]]
      throw_broken();
    // Outside a transaction the position would commit on its own, apart from the rows it
    // vouches for: exactly the two-write window this sink exists to close.
    if (!db_.in_transaction())
      throw std::logic_error(
          detail::concat("commit_order::sqlite: ", what, " outside a transaction"));
  }

  // An operator's act commits on its own: inside a unit, the unit's rollback would take it back.
  void require_no_transaction(const char* what) const {
    if (db_.in_transaction())
      throw std::logic_error(detail::concat(
          "commit_order::sqlite: ", what,
          " inside a transaction: an operator's act commits on its own, and rolling the unit "
          "back would take it back -- call it between units, or use sqlite::stream_admin"));
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_broken() const {
    throw infrastructure_error(
        broken_,
        detail::concat("the sink is unusable: a ROLLBACK failed (", sqlite3_errstr(broken_),
                       ") and left its transaction open -- destroy and reopen the sink"));
  }

  connection db_;
  mutable std::optional<detail::position_table> positions_;
  mutable std::optional<detail::stream_table> streams_;
  std::optional<detail::claim_table> claim_log_;
  std::optional<statement> write_;
  mutable std::optional<statement> watermark_;
  std::optional<statement> stored_by_key_;  // PartitionScoped: the rare path's lookup
  std::optional<statement> begin_;
  std::optional<statement> commit_;
  std::optional<statement> rollback_;
  // Claimed epochs per partition: a handful of entries, searched linearly; they change only
  // when partitions are claimed, never on the write path.
  std::vector<std::pair<partition_id, epoch>> claims_;
  std::vector<std::pair<partition_id, epoch>> pending_claims_;  // claimed in the open transaction
  int broken_ = SQLITE_OK;  // the code of a ROLLBACK that left the transaction open
};

/// Idempotent, OffsetGuarded, PartitionScoped, Transactional: fit for every policy and for a
/// table shared by the partitions of a stream.
template <describes_table D, durability_mode Durability = wal_full>
using guarded_upsert_sink = table_sink<D, guarded_upsert_mode, Durability>;
/// Idempotent, VersionGuarded<Member>, Transactional: fit for every policy; a repartitioned
/// stream (keys moving between partitions) is safe. `Member` must be a value column of D.
template <describes_table D, auto Member, durability_mode Durability = wal_full>
using version_guarded_sink = table_sink<D, version_guarded_mode<Member>, Durability>;
/// Idempotent, Transactional, not OffsetGuarded: AtLeastOnce, AutoCommit; never
/// TransactionalPosition (rule R5).
template <describes_table D, durability_mode Durability = wal_full>
using upsert_sink = table_sink<D, upsert_mode, Durability>;
/// Not Idempotent: AtMostOnce only (rules R1, R3, R5).
template <describes_table D, durability_mode Durability = wal_full>
using append_sink = table_sink<D, append_mode, Durability>;

}  // namespace commit_order::sqlite
