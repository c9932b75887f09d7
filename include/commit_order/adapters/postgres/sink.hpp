// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/sink.hpp — sinks that write event rows into a PostgreSQL
// table, with the stream's positions (one per partition, each with its owner's epoch) in the
// same transaction.
//
//   postgres::guarded_upsert_sink<D>     INSERT ... ON CONFLICT (<key>) DO UPDATE SET ...
//                                        WHERE t.source_partition = excluded.source_partition
//                                          AND t.source_offset < excluded.source_offset
//                                        Idempotent, OffsetGuarded, PartitionScoped, Transactional
//   postgres::version_guarded_sink<D, &E::v>   ... WHERE t.v < excluded.v: a per-key version
//                                        set by the producer, which survives repartitioning
//                                        Idempotent, VersionGuarded<&E::v>, Transactional
//   postgres::upsert_sink<D>             the upsert without a WHERE: last writer wins
//                                        Idempotent, Transactional
//   postgres::append_sink<D>             plain INSERT, every write a new row
//                                        Transactional only: replays become duplicate rows
// plus the durability of the durability mode, the last template parameter: Synced under the
// default `synced`, checked with the server at every connect (connection.hpp).
//
// ---- the write path: a unit in two round trips -----------------------------------------------
// apply() inside a transaction only buffers the row. commit() sends, in one pipeline (one
// round trip):
//   BEGIN;
//   SELECT "partition", owner_epoch ... FOR UPDATE      -- the fence: the position rows of the
//                                                       -- partitions it stores, locked first
//   INSERT ... SELECT * FROM unnest($1::bigint[], ...) ON CONFLICT ... RETURNING
//                                                       -- the unit's rows: one statement,
//                                                       -- one array per column
//   INSERT INTO commit_order_positions ... SELECT ... FROM unnest(...) ON CONFLICT ...
//     WHERE t.owner_epoch = excluded.owner_epoch RETURNING "partition"
// reads every result and checks that each position row is owned at the writer's epoch and
// that the position statement changed exactly one row per partition -- and only then sends
// COMMIT, in a second round trip. COMMIT is never queued behind a check that has not been
// read: a zombie's position update that changed no row raises no error, so a COMMIT already
// in the pipeline would commit the zombie's rows.
//
// Every row of a unit is sent, in the order its record was applied; a statement carries at
// most `rows_per_statement` rows and never a key twice (it could not touch one row twice:
// 21000): a row whose key came earlier in its statement starts the next statement, so it
// applies after that row, as record by record, and the server's guard (offset, version) and
// constraints decide what stays -- never an ordering of this code's, which could differ from
// the server's (a text version under a collation, a NaN). Constraints between the rows of one
// unit (a unique non-key column one row gives up and a later one takes, a parent before its
// children in the same table) behave as applying the records in offset order does. The same
// key from two partitions in one unit is `key_moved_partition` under the offset guard. Two
// writers whose units share keys in different orders can deadlock (40P01); the sink redoes the
// unit (below), as it does a serialization failure.
//
// RETURNING names the rows that changed; a row the guard kept out is a replay, counted in
// `stats().rows_absorbed` (apply() returns before its row is sent, so it cannot say). For the
// partition-scoped guard, absorbed rows are checked once more, in the same transaction,
// before COMMIT: a stored row of another partition is `key_moved_partition`, never an absorb.
//
// ---- failures ----------------------------------------------------------------------------
//   a row refused for its values (22xxx, 23xxx, also a deferred constraint at COMMIT): the
//     transaction is rolled back, and every row of the unit is applied again, one statement
//     each, in offset order, in a transaction that is rolled back (constraints keep their
//     declared timing). The first statement refused is the record's: commit() throws
//     `row_failed` naming it, with the `record_error` nested, and the pipeline retries,
//     dead-letters or stops on that record. A deferred constraint refused when the unit ends
//     names the one record the unit passes without (an entry whose counterpart is missing;
//     never the healthy halves of a pair). If no record is the one (several are, or none: a
//     conflict with a transaction that has gone since), no record is to blame: `unit_refused`,
//     an infrastructure_error; the position is held, nothing is dead-lettered.
//   40001 serialization failure, 40P01 deadlock: the sink sends the whole unit again (up to
//     `serialization_retries` times; the position is only stored with its rows), then
//     `serialization_failure`, an infrastructure_error. Only a unit nothing of which was sent
//     before commit() is retried so (the pipeline's units; not a claim).
//   the connection lost, the server shutting down (57P01/57P02): `connection_lost`. A unit
//     whose connection died before its COMMIT was sent is sent once more on a new connection
//     (nothing of it was committed); otherwise the sink reopens the connection at its next
//     transaction and the pipeline redoes the unit. A COMMIT whose answer was lost may or may
//     not have happened: rows and position went together either way, and recovery reads which.
//   disk full (53100), any other failure: infrastructure_error; the unit is redone.
// Outside a transaction apply() is its own transaction, and a refused row throws its
// `record_error` directly.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/adapters/detail/write_modes.hpp"
#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/position_table.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/adapters/postgres/text.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::postgres {

// ---- write modes: commit_order/adapters/detail/write_modes.hpp ------------------------------

using adapters::append_mode;
using adapters::guard_kind;
using adapters::guarded_upsert_mode;
using adapters::upsert_mode;
using adapters::version_guarded_mode;
using adapters::write_mode;
using adapters::detail::is_version_guarded_mode;

struct sink_options final {
  /// The stream (the consumer's name) and the topic it reads: with the partition, the key of
  /// the position rows.
  std::string stream = "default";
  std::string topic = "default";
  std::string position_table = "commit_order_positions";
  std::string stream_table = "commit_order_streams";
  /// The schema of every table (empty: the server's search_path); created if missing.
  std::string schema;
  /// CREATE TABLE IF NOT EXISTS for the data, position and stream tables (and the schema).
  bool create_tables = true;
  /// Rows per write statement: a unit with more is sent as several statements (in the same
  /// round trip). Arrays carry any number of rows in one parameter each, so this bounds
  /// message size, not PostgreSQL's 65,535-parameter limit (which arrays never approach).
  std::size_t rows_per_statement = 10000;
  /// How often a unit that met a serialization failure or deadlock is sent again.
  std::size_t serialization_retries = 3;
  std::chrono::milliseconds lock_timeout{10000};
  std::chrono::milliseconds idle_in_transaction_timeout{60000};
  std::chrono::seconds connect_timeout{10};
};

/// What a sink did, for tests, benchmarks and monitoring.
struct sink_stats final {
  std::uint64_t transactions = 0;      ///< committed
  std::uint64_t round_trips = 0;       ///< pipelines and single statements sent
  std::uint64_t write_statements = 0;  ///< statements carrying rows
  std::uint64_t rows_sent = 0;
  /// Statements begun early because a key came again in its unit (rows of one key never share
  /// a statement: each applies after the one before it, as record by record).
  std::uint64_t key_splits = 0;
  std::uint64_t rows_absorbed = 0;  ///< kept out by the guard (replays), in committed units
  std::uint64_t retries = 0;        ///< units sent again after 40001 / 40P01
  std::uint64_t diagnoses = 0;      ///< units whose rows were sent one by one to find a failure
};

namespace detail {

using adapters::detail::key_alias;
using adapters::detail::mode_capabilities;

template <class D, class Mode>
struct table_sql final {
  using cols = columns_of<typename D::keys, typename D::values>;

  static std::string create() {
    const std::string t = quote_identifier(D::name);
    std::string sql = concat("CREATE TABLE IF NOT EXISTS ", t, " (", cols::definitions(), ", ",
                             quote_identifier(D::partition_column), " INTEGER NOT NULL, ",
                             quote_identifier(D::offset_column), " BIGINT NOT NULL");
    if constexpr (Mode::keyed)
      sql.append(concat(", PRIMARY KEY (", cols::key_names(), ")"));
    // The recovery check and the watermark read the highest offset of one partition.
    sql.append(concat("); CREATE INDEX IF NOT EXISTS ",
                      quote_identifier(concat(D::name, "_by_source")), " ON ", t, " (",
                      quote_identifier(D::partition_column), ", ",
                      quote_identifier(D::offset_column), ")"));
    return sql;
  }

  static std::string write() {
    const std::string partition = quote_identifier(D::partition_column);
    const std::string offset = quote_identifier(D::offset_column);
    std::string sql = concat("INSERT INTO ", quote_identifier(D::name), " AS t (",
                             cols::all_names(), ", ", partition, ", ", offset,
                             ") SELECT * FROM unnest(", cols::array_parameters(1), ", $");
    append_integer(sql, cols::count + 1);
    sql.append("::integer[], $");
    append_integer(sql, cols::count + 2);
    sql.append("::bigint[])");
    if constexpr (Mode::keyed) {
      const std::string updates = cols::updates();
      sql.append(concat(" ON CONFLICT (", cols::key_names(), ") DO UPDATE SET ", updates,
                        updates.empty() ? "" : ", ", partition, " = excluded.", partition, ", ",
                        offset, " = excluded.", offset));
      if constexpr (Mode::guard == guard_kind::offset) {
        sql.append(concat(" WHERE t.", partition, " = excluded.", partition, " AND t.", offset,
                          " < excluded.", offset));
      } else if constexpr (Mode::guard == guard_kind::version) {
        const std::string version = quote_identifier(version_column());
        sql.append(concat(" WHERE t.", version, " < excluded.", version));
      }
      // The rows that changed: a row missing here was kept out by the guard.
      if constexpr (Mode::guard != guard_kind::none)
        sql.append(concat(" RETURNING ", partition, ", ", offset));
    }
    return sql;
  }

  /// Of the given keys, each with the partition its row came from, those whose stored row
  /// came from another partition (the first by position in the arrays).
  static std::string moved() {
    const std::string partition = quote_identifier(D::partition_column);
    std::string sql =
        concat("SELECT u.n, t.", partition, ", t.", quote_identifier(D::offset_column),
               " FROM unnest(", cols::key_array_parameters(1), ", $");
    append_integer(sql, cols::key_count + 1);
    sql.append(concat("::integer[]) WITH ORDINALITY AS u(", cols::key_names(), ", p, n) JOIN ",
                      quote_identifier(D::name), " AS t ON ", cols::key_join("t", "u"), " WHERE t.",
                      partition, " <> u.p ORDER BY u.n LIMIT 1"));
    return sql;
  }

  static std::string watermark() {
    return concat("SELECT MAX(", quote_identifier(D::offset_column), ") FROM ",
                  quote_identifier(D::name), " WHERE ", quote_identifier(D::partition_column),
                  " = $1");
  }

  static constexpr std::string_view version_column() {
    if constexpr (Mode::guard == guard_kind::version) {
      return version_column_of<typename D::values>();
    } else {
      return {};
    }
  }

 private:
  template <class Values>
  static constexpr std::string_view version_column_of() {
    return version_name<Values>::get();
  }
  template <class Values>
  struct version_name;
  template <class... V>
  struct version_name<value_columns<V...>> {
    static constexpr std::string_view get() {
      std::string_view name;
      (
          [&] {
            if constexpr (std::is_same_v<decltype(V::member), decltype(Mode::member)>) {
              if (V::member == Mode::member)
                name = V::name;
            }
          }(),
          ...);
      return name;
    }
  };
};

template <class Mode, class Event>
constexpr bool version_fits() {
  if constexpr (Mode::guard == guard_kind::version) {
    using member_t = std::remove_cv_t<decltype(Mode::member)>;
    if constexpr (std::is_member_object_pointer_v<member_t>) {
      return std::is_same_v<typename member_pointer_traits<member_t>::owner, Event>;
    } else {
      return false;
    }
  } else {
    return true;
  }
}

}  // namespace detail

/// A sink writing rows of table D in write mode Mode, with the durability of durability mode
/// Durability (synced unless told otherwise). Not final: a test harness may derive from it to
/// pace or mark writes without re-declaring anything.
template <describes_table D, write_mode Mode = guarded_upsert_mode,
          durability_mode Durability = synced>
class table_sink : public detail::key_alias<D, Mode::keyed> {
  using cols = detail::columns_of<typename D::keys, typename D::values>;
  using sql = detail::table_sql<D, Mode>;
  static constexpr bool scoped = Mode::guard == guard_kind::offset;
  static constexpr bool guarded = Mode::guard != guard_kind::none;

  static_assert(part_rules::require<part_rules::postgres_version_elsewhere,
                                    detail::version_fits<Mode, typename D::event_type>()>());
  static_assert(part_rules::require<part_rules::postgres_version_not_a_column,
                                    (!detail::version_fits<Mode, typename D::event_type>() ||
                                     Mode::guard != guard_kind::version ||
                                     !sql::version_column().empty())>());

 public:
  using row_type = typename D::event_type;
  using description = D;
  using mode = Mode;
  using capabilities =
      typename detail::mode_capabilities<Mode, typename Durability::durability>::type;
  /// What this code gives: a derived sink that restates `capabilities` keeps it (rule S28).
  using implemented_capabilities = capabilities;

  /// Connects to `conninfo` (a libpq connection string), checks that the server gives the
  /// durability mode (durability_mismatch otherwise), creates the tables unless told
  /// otherwise and prepares every statement. Throws infrastructure_error when the server cannot
  /// be reached.
  explicit table_sink(std::string conninfo, sink_options options = {})
      : db_(connection::open<Durability>(connection_options{
            std::move(conninfo), options.schema, options.create_tables, options.lock_timeout,
            options.idle_in_transaction_timeout, options.connect_timeout}))
      , options_(std::move(options)) {
    if (options_.rows_per_statement == 0)
      throw std::invalid_argument("commit_order::postgres: rows_per_statement must be at least 1");
    if (options_.create_tables) {
      db_.exec(detail::concat("BEGIN; SELECT pg_advisory_xact_lock(7206164131); ", sql::create(),
                              "; COMMIT"));
    }
    detail::position_sql::prepare(db_,
                                  position_location{options_.stream, options_.topic,
                                                    options_.position_table, options_.stream_table},
                                  options_.create_tables);
    table_ = resolved_table();
    bound_to_ = detail::bound_to_with_source(table_, {});
    db_.prepare(write_name, sql::write());
    db_.prepare(watermark_name, sql::watermark());
    if constexpr (scoped)
      db_.prepare(moved_name, sql::moved());
  }

  table_sink(const table_sink&) = delete;
  table_sink& operator=(const table_sink&) = delete;

  /// A sink destroyed inside a transaction leaves nothing half-written behind: it rolls back,
  /// and closing the connection would discard the transaction anyway.
  ~table_sink() {
    try {
      rollback();
    } catch (...) {
      // Nothing to report to: closing the connection (next) discards the open transaction.
    }
  }

  /// Binds the position rows to the source they are read from as well as to the table (the
  /// pipeline calls it with the source's identity, before the first claim).
  void bind_source(const std::string& identity) {
    require_no_transaction("bind_source");
    bound_to_ = detail::bound_to_with_source(table_, identity);
  }

  /// The data table a position of this sink's records vouches for (table_bound_sink), as the
  /// server resolves it: a position store of the pipeline is bound to it too.
  [[nodiscard]] const std::string& bound_table() const noexcept { return table_; }

  /// The database of that table (database_bound_sink), as the connection names it: a position
  /// store connected to another database names it in its binding.
  [[nodiscard]] std::string bound_database() const { return db_.database_name(); }

  // ---- rows ----------------------------------------------------------------------------------

  /// The row of one record of partition `k`. Inside a transaction it is buffered and sent at
  /// commit (see above); outside, it is its own transaction, and a refused row throws its
  /// record_error here.
  void apply(partition_id k, offset source_offset, const row_type& row) {
    if (cols::has_nul(row)) [[unlikely]]
      throw record_error("22021", detail::concat("the row of ", cols::key_text(row),
                                                 " holds a NUL byte in a string, which no "
                                                 "PostgreSQL text can store"));
    if (state_ == tx_state::idle) {
      apply_alone(k, source_offset, row);
      return;
    }
    require_transaction("apply()");
    rows_.push_back(pending_row{row, k, source_offset});
  }
  /// The row of one record of a single-partition stream (partition 0).
  void apply(offset source_offset, const row_type& row) {
    apply(partition_id{0}, source_offset, row);
  }

  // ---- transactions --------------------------------------------------------------------------

  /// Opens a transaction. Nothing is sent yet: BEGIN travels with the unit's rows.
  void begin() {
    if (state_ != tx_state::idle)
      throw std::logic_error("commit_order::postgres: begin() inside an open transaction");
    state_ = tx_state::pending;
  }

  /// Sends what the transaction buffered, checks the fence, the positions and the guard, and
  /// commits (see above). Throws `fenced`, `key_moved_partition`, `row_failed` (a row refused
  /// for its values, naming its record) or an infrastructure_error; the transaction is then
  /// rolled back.
  void commit() {
    if (state_ == tx_state::idle)
      throw std::logic_error("commit_order::postgres: commit() without begin()");
    require_transaction("commit()");
    // Nothing was sent before commit(): the sink holds the whole unit and can send it again.
    const bool whole = state_ == tx_state::pending;
    bool reconnected = false;
    commit_sent_ = false;
    for (std::size_t attempt = 0;; ++attempt) {
      try {
        if (state_ == tx_state::pending && rows_.empty() && staged_.empty()) {
          finish_commit();  // an empty transaction: nothing to send
          return;
        }
        send_buffered();
        send_commit();
        finish_commit();
        return;
      } catch (const serialization_failure&) {
        if (!whole || attempt >= options_.serialization_retries) {
          state_ = tx_state::failed;
          throw;
        }
        ++stats_.retries;
        // Held back a little longer each time, so the transaction it met can finish.
        std::this_thread::sleep_for(std::chrono::milliseconds(1) * (1 << attempt));
        restart_unit();
      } catch (const connection_lost&) {
        // A connection that died before COMMIT was sent took nothing of the unit with it (the
        // server discards an open transaction): the unit goes again, once, on a new
        // connection -- the server restarted, or ended an idle session, between two units. A
        // COMMIT whose answer was lost is never sent again (it may have happened).
        if (!whole || commit_sent_ || reconnected) {
          state_ = tx_state::failed;
          throw;
        }
        reconnected = true;
        restart_unit();
      } catch (...) {
        state_ = tx_state::failed;
        throw;
      }
    }
  }

  /// Undoes everything since begin(): drops the buffered rows and positions, and rolls back
  /// what was sent. A no-op outside a transaction. If ROLLBACK fails, the connection is
  /// dropped, which ends the transaction on the server; the next transaction reconnects.
  void rollback() {
    rows_.clear();
    staged_.clear();
    pending_claims_.clear();
    rows_sent_ = staged_sent_ = 0;
    absorbed_in_tx_ = 0;
    state_ = tx_state::idle;
    roll_back_on_server();
  }

  // ---- positions, per partition, inside the transaction --------------------------------------

  /// The position stored for partition `k` (none before the first commit of one).
  [[nodiscard]] std::optional<position> load_position(partition_id k) const {
    return load_row(k).stored;
  }

  /// Stages `p` for partition `k`, as the epoch this sink claimed it at (0 if it never did).
  void store_position(partition_id k, position p) { store_position(k, p, owner_epoch_of(k)); }

  /// Stages `p` for partition `k` while it is owned at `e`. The check is made as the
  /// transaction commits, on the locked position row, before COMMIT is sent: a stale owner's
  /// commit() throws `fenced`, and nothing of its transaction is committed.
  void store_position(partition_id k, position p, epoch e) { stage(k, p, e, std::nullopt); }

  /// The same, with the fingerprint of the record `p` follows (fingerprinting_sink): kept in
  /// the row, and returned by the next claim of `k`, so that the record can be checked to be
  /// still the one at `p - 1` (a topic recreated under its name reuses every offset).
  void store_position(partition_id k, position p, epoch e, std::uint64_t fingerprint) {
    stage(k, p, e, fingerprint);
  }

  /// The fingerprint stored with the position the last claim or claim_next returned (none when
  /// it was stored without one).
  [[nodiscard]] std::optional<std::uint64_t> claimed_fingerprint() const noexcept {
    return claimed_fingerprint_;
  }

  /// Inside a transaction: makes `e` the owner of partition `k` and returns its stored
  /// position; throws `fenced` when a newer owner holds it. Runs now (its answer is needed).
  std::optional<position> claim(partition_id k, epoch e) {
    require_transaction("claim()");
    open_on_server();
    std::string part, ep;
    detail::append_integer(part, k.value());
    detail::append_integer(ep, e.value());
    const std::string& bound = bound_to();
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str(),
                            ep.c_str(), bound.c_str()};
    const result r = exec(detail::position_sql::claim, 5, values);
    if (r.rows() == 0)
      throw fenced(e, load_row(k).owner, k);
    check_binding(k, r, 1);
    claimed_fingerprint_ = fingerprint_in(r, 2);
    pending_claims_[k] = e;
    return r.is_null(0, 0) ? std::nullopt : std::optional{position{r.integer(0, 0)}};
  }

  /// Inside a transaction: raises partition `k`'s owner epoch by one in one statement (a
  /// consumer given no epoch of its own: the last one started owns it, the one before is
  /// fenced at its next commit).
  claimed claim_next(partition_id k) {
    require_transaction("claim_next()");
    open_on_server();
    std::string part;
    detail::append_integer(part, k.value());
    const std::string& bound = bound_to();
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str(),
                            bound.c_str()};
    const result r = exec(detail::position_sql::claim_next, 4, values);
    check_binding(k, r, 2);
    claimed_fingerprint_ = fingerprint_in(r, 3);
    const epoch e{r.integer(0, 0)};
    pending_claims_[k] = e;
    return claimed{e, r.is_null(0, 1) ? std::nullopt : std::optional{position{r.integer(0, 1)}}};
  }

  // The same for a single-partition stream: partition 0.
  [[nodiscard]] std::optional<position> load_position() const {
    return load_position(partition_id{0});
  }
  void store_position(position p) { store_position(partition_id{0}, p); }
  void store_position(position p, epoch e) { store_position(partition_id{0}, p, e); }
  std::optional<position> claim(epoch e) { return claim(partition_id{0}, e); }
  claimed claim_next() { return claim_next(partition_id{0}); }

  /// The epoch that owns partition `k`'s position row now (committed, or claimed in the open
  /// transaction).
  [[nodiscard]] epoch owner_epoch(partition_id k = partition_id{0}) const {
    return load_row(k).owner;
  }
  /// The epoch of the last claim of `k` whose transaction committed.
  [[nodiscard]] std::optional<epoch> claimed_epoch(partition_id k = partition_id{0}) const {
    const auto it = claimed_.find(k);
    return it == claimed_.end() ? std::nullopt : std::optional{it->second};
  }

  // ---- what a stream's owners share ----------------------------------------------------------

  /// The stream's era (see epoch::of): raised only by `bump_era`.
  [[nodiscard]] std::int64_t era() const {
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str()};
    const result r = exec(detail::position_sql::era, 2, values);
    return r.rows() == 0 ? 0 : r.integer(0, 0);
  }

  /// Inside a transaction: records the stream's partition count at the first claim; a
  /// different count later throws `partition_count_changed`.
  void check_partition_count(std::size_t n) {
    require_transaction("check_partition_count()");
    open_on_server();
    std::string count;
    detail::append_integer(count, n);
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), count.c_str()};
    const result r = exec(detail::position_sql::count, 3, values);
    const auto stored = static_cast<std::size_t>(r.integer(0, 0));
    if (stored != n)
      throw partition_count_changed(stored, n);
  }

  /// The operator's act when a consumer group was deleted and recreated (its generations
  /// restarted): every epoch of the new era is above every epoch of the old. Outside a
  /// transaction; returns the new era.
  std::int64_t bump_era() {
    require_no_transaction("bump_era()");
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str()};
    return exec(detail::position_sql::bump_era, 2, values).integer(0, 0);
  }

  /// The operator's acknowledgement of a repartitioned stream (after draining the old
  /// partitions): the next claim records the count it sees. Outside a transaction.
  void accept_partition_count() {
    require_no_transaction("accept_partition_count()");
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str()};
    exec(detail::position_sql::accept_count, 2, values);
  }

  // ---- progress ------------------------------------------------------------------------------

  /// The highest source offset of partition `k` present in the table.
  [[nodiscard]] std::optional<offset> applied_watermark(partition_id k) const {
    if (state_ != tx_state::idle && state_ != tx_state::failed)
      open_on_server();  // read this transaction's own rows too
    std::string part;
    detail::append_integer(part, k.value());
    const char* values[] = {part.c_str()};
    const result r = exec(watermark_name, 1, values);
    if (r.rows() == 0 || r.is_null(0, 0))
      return std::nullopt;
    return offset{r.integer(0, 0)};
  }
  /// The same for a single-partition stream: partition 0.
  [[nodiscard]] std::optional<offset> applied_watermark() const {
    return applied_watermark(partition_id{0});
  }

  [[nodiscard]] const sink_stats& stats() const noexcept { return stats_; }
  [[nodiscard]] const sink_options& options() const noexcept { return options_; }
  /// The connection, for reading the table (and for tests). Outside a transaction only.
  [[nodiscard]] connection& database() noexcept { return db_; }

 private:
  static constexpr const char* write_name = "co_write";
  static constexpr const char* watermark_name = "co_watermark";
  static constexpr const char* moved_name = "co_moved";
  static constexpr std::size_t arrays_per_statement = cols::count + 2;
  /// Statements per round trip while looking for the row that failed.
  static constexpr std::size_t diagnosis_chunk = 256;

  enum class tx_state {
    idle,     ///< no transaction
    pending,  ///< begin() was called; nothing sent yet
    open,     ///< BEGIN and part of the transaction were sent
    failed,   ///< a call failed: nothing more is taken until rollback()
  };

  struct pending_row {
    row_type row;
    partition_id k;
    offset o;
  };
  struct staged_position {
    partition_id k;
    position p;
    epoch e;
    std::optional<std::uint64_t> fingerprint;
  };

  void stage(partition_id k, position p, epoch e, std::optional<std::uint64_t> fingerprint) {
    require_transaction("store_position()");
    for (std::size_t i = staged_sent_; i < staged_.size(); ++i) {
      if (staged_[i].k == k) {
        staged_[i] = staged_position{k, p, e, fingerprint};
        return;
      }
    }
    staged_.push_back(staged_position{k, p, e, fingerprint});
  }

  // The fingerprint column of a claim's answer (stored as the same 64 bits, signed).
  static std::optional<std::uint64_t> fingerprint_in(const result& r, int column) {
    if (r.is_null(0, column))
      return std::nullopt;
    return static_cast<std::uint64_t>(r.integer(0, column));
  }

  void require_transaction(const char* what) const {
    if (state_ == tx_state::failed)
      throw std::logic_error(
          detail::concat("commit_order::postgres: ", what,
                         " after a failure in the transaction: call rollback() first"));
    // Outside a transaction the position would commit on its own, apart from the rows it
    // vouches for: exactly the two-write window this sink exists to close.
    if (state_ == tx_state::idle)
      throw std::logic_error(
          detail::concat("commit_order::postgres: ", what, " outside a transaction"));
  }
  void require_no_transaction(const char* what) const {
    if (state_ != tx_state::idle)
      throw std::logic_error(
          detail::concat("commit_order::postgres: ", what, " inside a transaction"));
  }

  // The data table as the server resolves it, schema-qualified whatever the options say (a
  // sink with no schema and one naming the schema the table is in vouch for the same table):
  // the schema the table is in, or where it would be created.
  std::string resolved_table() {
    const result r = db_.exec(detail::concat(
        "SELECT coalesce((SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = "
        "to_regclass(",
        detail::quote_literal(detail::quote_identifier(D::name)), ")), current_schema())"));
    if (r.rows() != 1 || r.is_null(0, 0))
      throw infrastructure_error("",
                                 "the server names no schema for the sink's table (the "
                                 "search_path is empty): set sink_options::schema");
    return detail::concat(r.text(0, 0), ".", D::name);
  }
  const std::string& bound_to() const noexcept { return bound_to_; }

  // The row a claim returned is bound to this sink's table, or the claim is refused.
  void check_binding(partition_id k, const result& r, int column) const {
    if (r.is_null(0, column))
      return;
    const std::string held(r.text(0, column));
    if (!detail::binding_holds(held, bound_to())) [[unlikely]]
      throw_bound_elsewhere(k, held);
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_bound_elsewhere(partition_id k,
                                                                    const std::string& held) const {
    detail::throw_bound_elsewhere(k, options_.schema, options_.position_table, options_.stream,
                                  options_.topic, held, bound_to());
  }

  epoch owner_epoch_of(partition_id k) const {
    if (const auto it = pending_claims_.find(k); it != pending_claims_.end())
      return it->second;
    if (const auto it = claimed_.find(k); it != claimed_.end())
      return it->second;
    return epoch{0};
  }

  struct position_row {
    std::optional<position> stored;
    epoch owner{};
  };
  position_row load_row(partition_id k) const {
    if (state_ != tx_state::idle && state_ != tx_state::failed)
      open_on_server();  // read this transaction's own positions too
    std::string part;
    detail::append_integer(part, k.value());
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str()};
    const result r = exec(detail::position_sql::load, 3, values);
    position_row row;
    if (r.rows() != 0) {
      if (!r.is_null(0, 0))
        row.stored = position{r.integer(0, 0)};
      row.owner = epoch{r.integer(0, 1)};
    }
    return row;
  }

  // One statement, now, outside a pipeline (inside the transaction if one is open).
  result exec(const char* name, int count, const char* const* values) const {
    if (!server_open_)
      db_.ensure();  // no transaction on the server: a lost connection can be reopened
    ++stats_.round_trips;
    return db_.exec_prepared(name, count, values);
  }

  // A call that needs the server's answer inside the transaction: whatever is buffered is
  // sent first (with BEGIN, if nothing was), so the call sees this transaction's own writes.
  void open_on_server() const {
    if (state_ == tx_state::pending || rows_sent_ < rows_.size() || staged_sent_ < staged_.size()) {
      try {
        send_buffered();
      } catch (...) {
        state_ = tx_state::failed;
        throw;
      }
    }
  }

  // Outside a transaction: one row, one transaction.
  void apply_alone(partition_id k, offset o, const row_type& row) {
    begin();
    rows_.push_back(pending_row{row, k, o});
    try {
      commit();
    } catch (const row_failed& f) {
      rollback();
      std::rethrow_if_nested(f);  // the record_error itself: this call is the record's
      throw;
    } catch (...) {
      rollback();
      throw;
    }
  }

  // ---- sending a transaction -----------------------------------------------------------------

  // The unsent rows, every one, in apply order (sent_), and where each statement starts
  // (bounds_): at most rows_per_statement rows, and never a key twice -- a row whose key came
  // earlier in the same statement starts the next one, so it applies after that row, as
  // record by record (the server's guard and constraints then decide, never this code).
  void select_rows() const {
    sent_.clear();
    bounds_.clear();
    const auto first = static_cast<std::uint32_t>(rows_sent_);
    const auto last = static_cast<std::uint32_t>(rows_.size());
    for (std::uint32_t i = first; i < last; ++i)
      sent_.push_back(i);
    if (sent_.empty())
      return;
    constexpr std::uint32_t none = ~std::uint32_t{0};
    if constexpr (Mode::keyed) {
      // The row of the same key before each row, if any: from a stable sort by key.
      order_.assign(sent_.begin(), sent_.end());
      const auto by_key = [this](std::uint32_t a, std::uint32_t b) {
        return cols::key_less(rows_[a].row, rows_[b].row);
      };
      if (!std::is_sorted(order_.begin(), order_.end(), by_key))
        std::stable_sort(order_.begin(), order_.end(), by_key);
      before_.assign(sent_.size(), none);
      for (std::size_t j = 1; j < order_.size(); ++j) {
        const std::uint32_t a = order_[j - 1];
        const std::uint32_t b = order_[j];
        if (by_key(a, b))
          continue;  // a new key
        if constexpr (Mode::guard == guard_kind::offset) {
          // Offsets of two partitions say nothing about which record is newer.
          if (rows_[a].k != rows_[b].k)
            throw key_moved_partition(cols::key_text(rows_[a].row), rows_[a].k, rows_[a].o,
                                      rows_[b].k, rows_[b].o);
        }
        before_[b - first] = a;
      }
    }
    const std::size_t per = options_.rows_per_statement;
    std::size_t start = 0;
    bounds_.push_back(0);
    for (std::size_t i = 1; i < sent_.size(); ++i) {
      bool repeated = false;
      if constexpr (Mode::keyed)
        repeated = before_[i] != none && before_[i] >= first + start;
      if (repeated || i - start == per) {
        stats_.key_splits += repeated && i - start != per;
        bounds_.push_back(static_cast<std::uint32_t>(i));
        start = i;
      }
    }
    bounds_.push_back(static_cast<std::uint32_t>(sent_.size()));
  }

  // The arrays of statement `chunk` (rows sent_[first, last)), ready as parameters.
  void encode(std::size_t chunk, std::size_t first, std::size_t last) const {
    const std::size_t base = chunk * arrays_per_statement;
    detail::array_builder* a = arrays_.data() + base;
    for (std::size_t c = 0; c < arrays_per_statement; ++c)
      a[c].clear();
    for (std::size_t i = first; i < last; ++i) {
      const pending_row& r = rows_[sent_[i]];
      cols::add_to(a, r.row);
      a[cols::count].add(r.k.value());
      a[cols::count + 1].add(r.o.value());
    }
    for (std::size_t c = 0; c < arrays_per_statement; ++c)
      params_[base + c] = a[c].finish();
  }

  // The fence and the positions' arrays: partitions ascending.
  void encode_positions() const {
    std::sort(staged_.begin() + static_cast<std::ptrdiff_t>(staged_sent_), staged_.end(),
              [](const staged_position& a, const staged_position& b) { return a.k < b.k; });
    for (auto& a : position_arrays_)
      a.clear();
    for (std::size_t i = staged_sent_; i < staged_.size(); ++i) {
      position_arrays_[0].add(staged_[i].k.value());
      position_arrays_[1].add(staged_[i].p.value());
      position_arrays_[2].add(staged_[i].e.value());
      if (staged_[i].fingerprint)
        position_arrays_[3].add(static_cast<std::int64_t>(*staged_[i].fingerprint));
      else
        position_arrays_[3].add_null();
    }
    position_params_[0] = options_.stream.c_str();
    position_params_[1] = options_.topic.c_str();
    for (std::size_t i = 0; i < 4; ++i)
      position_params_[2 + i] = position_arrays_[i].finish();
  }

  // Sends BEGIN (if the transaction is not open on the server yet), the fence, the unsent
  // rows and the staged positions in one round trip, reads every result, and checks the
  // fence, the positions and the guard. Returns with all of it in the open transaction; on a
  // failure the transaction is rolled back on the server and the error thrown.
  void send_buffered() const {
    const bool begin = !server_open_;
    if (begin)
      db_.ensure();  // a connection lost since the last transaction: nothing of this one is lost
    select_rows();
    const std::size_t chunks = bounds_.empty() ? 0 : bounds_.size() - 1;
    // Sized first: a builder that moved (a vector growing) would leave its parameter dangling.
    if (arrays_.size() < chunks * arrays_per_statement)
      arrays_.resize(chunks * arrays_per_statement);
    params_.resize(chunks * arrays_per_statement);
    for (std::size_t c = 0; c < chunks; ++c)
      encode(c, bounds_[c], bounds_[c + 1]);
    const bool positions = staged_sent_ < staged_.size();
    if (positions)
      encode_positions();
    if (!begin && chunks == 0 && !positions) {
      state_ = tx_state::open;
      return;  // nothing to send
    }

    // Queue: [BEGIN] [fence] chunk... [positions]. Indices of each in the results.
    std::size_t index = 0;
    if (begin) {
      db_.send("BEGIN");
      server_open_ = true;
      ++index;
    }
    const std::size_t fence_at = index;
    if (positions) {
      db_.send_prepared(detail::position_sql::fence, 3, position_params_);
      ++index;
    }
    const std::size_t rows_at = index;
    for (std::size_t c = 0; c < chunks; ++c)
      db_.send_prepared(write_name, static_cast<int>(arrays_per_statement),
                        params_.data() + c * arrays_per_statement);
    index += chunks;
    const std::size_t store_at = index;
    if (positions)
      db_.send_prepared(detail::position_sql::store, 6, position_params_);
    ++stats_.round_trips;
    stats_.write_statements += chunks;
    stats_.rows_sent += sent_.size();
    try {
      db_.run();
    } catch (...) {
      server_open_ = false;  // the connection is gone, and the transaction with it
      throw;
    }
    std::vector<result>& results = db_.results();

    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].ok())
        continue;
      // The first statement that failed (the rest were skipped).
      const result failure = std::move(results[i]);
      roll_back_on_server();
      state_ = tx_state::failed;
      const bool a_row = i >= rows_at && i < store_at;
      if (a_row && is_record_failure(failure.sqlstate()))
        diagnose(failure);
      if (is_serialization_failure(failure.sqlstate()))
        throw serialization_failure(failure.sqlstate(), failure.message());
      // A refused position or fence statement is not a record's doing.
      throw infrastructure_error(
          failure.sqlstate(),
          detail::concat(a_row ? "writing the unit's rows: " : "", failure.message()));
    }

    if (positions)
      check_positions(results[fence_at], results[store_at]);
    if constexpr (guarded)
      count_absorbed(results, rows_at, chunks);
    state_ = tx_state::open;
    rows_sent_ = rows_.size();
    staged_sent_ = staged_.size();
  }

  // Every staged partition is owned at the writer's epoch (the fence, on locked rows), and
  // the position statement changed exactly its row.
  void check_positions(const result& fence, const result& stored) const {
    for (std::size_t i = staged_sent_; i < staged_.size(); ++i) {
      const staged_position& s = staged_[i];
      epoch owner{0};
      for (int r = 0; r < fence.rows(); ++r)
        if (fence.integer(r, 0) == s.k.value())
          owner = epoch{fence.integer(r, 1)};
      bool changed = false;
      for (int r = 0; r < stored.rows(); ++r)
        changed = changed || stored.integer(r, 0) == s.k.value();
      if (owner != s.e || !changed) {
        roll_back_on_server();
        state_ = tx_state::failed;
        throw fenced(s.e, owner, s.k);
      }
    }
    if (stored.rows() != static_cast<int>(staged_.size() - staged_sent_)) {
      roll_back_on_server();
      state_ = tx_state::failed;
      throw infrastructure_error("",
                                 "the position statement changed another number of rows "
                                 "than the partitions it stored");
    }
  }

  // Rows the guard kept out are missing from RETURNING (which names each changed row by its
  // incoming partition and offset). Partition-scoped: an absorbed row whose stored row came
  // from another partition is a moved key, checked before COMMIT.
  void count_absorbed(std::vector<result>& results, std::size_t rows_at, std::size_t chunks) const {
    std::size_t returned = 0;
    for (std::size_t c = 0; c < chunks; ++c)
      returned += static_cast<std::size_t>(results[rows_at + c].rows());
    if (returned == sent_.size())
      return;  // nothing absorbed: the common case, decided without reading a value
    changed_.clear();
    for (std::size_t c = 0; c < chunks; ++c) {
      const result& r = results[rows_at + c];
      for (int i = 0; i < r.rows(); ++i)
        changed_.emplace_back(r.integer(i, 0), r.integer(i, 1));
    }
    std::sort(changed_.begin(), changed_.end());
    absorbed_.clear();
    for (const std::uint32_t i : sent_) {
      const std::pair<std::int64_t, std::int64_t> id{rows_[i].k.value(), rows_[i].o.value()};
      if (!std::binary_search(changed_.begin(), changed_.end(), id))
        absorbed_.push_back(i);
    }
    if constexpr (scoped) {
      if (!absorbed_.empty())
        check_moved();
    }
    absorbed_in_tx_ += absorbed_.size();
  }

  void check_moved() const {
    std::vector<detail::array_builder> arrays(cols::key_count + 1);
    for (auto& a : arrays)
      a.clear();
    for (const std::uint32_t i : absorbed_) {
      cols::add_key_to(arrays.data(), rows_[i].row);
      arrays[cols::key_count].add(rows_[i].k.value());
    }
    std::vector<const char*> values;
    for (auto& a : arrays)
      values.push_back(a.finish());
    db_.send_prepared(moved_name, static_cast<int>(values.size()), values.data());
    ++stats_.round_trips;
    try {
      db_.run();
    } catch (...) {
      server_open_ = false;
      state_ = tx_state::failed;
      throw;
    }
    const result r = std::move(db_.results().front());
    if (!r.ok()) {
      roll_back_on_server();
      state_ = tx_state::failed;
      db_.fail(r, "checking the absorbed rows' partitions");
    }
    if (r.rows() != 0) {
      const pending_row& incoming = rows_[absorbed_[static_cast<std::size_t>(r.integer(0, 0) - 1)]];
      roll_back_on_server();
      state_ = tx_state::failed;
      throw key_moved_partition(
          cols::key_text(incoming.row),
          partition_id{static_cast<partition_id::value_type>(r.integer(0, 1))},
          offset{r.integer(0, 2)}, incoming.k, incoming.o);
    }
  }

  void send_commit() const {
    commit_sent_ = true;
    db_.send("COMMIT");
    ++stats_.round_trips;
    try {
      db_.run();
    } catch (...) {
      // The answer was lost with the connection: the COMMIT may or may not have happened. Rows
      // and position went together either way; recovery reads which.
      server_open_ = false;
      state_ = tx_state::failed;
      throw;
    }
    const result r = std::move(db_.results().front());
    if (r.ok()) {
      server_open_ = false;
      return;
    }
    state_ = tx_state::failed;
    roll_back_on_server();
    if (is_record_failure(r.sqlstate()))  // a deferred constraint: does one record fail?
      diagnose(r);
    if (is_serialization_failure(r.sqlstate()))
      throw serialization_failure(r.sqlstate(), r.message());
    throw infrastructure_error(r.sqlstate(), detail::concat("COMMIT: ", r.message()));
  }

  // The unit is sent again from the start (nothing of it is on the server).
  void restart_unit() {
    state_ = tx_state::pending;
    rows_sent_ = staged_sent_ = 0;
    absorbed_in_tx_ = 0;
  }

  void finish_commit() {
    for (const auto& [k, e] : pending_claims_)
      claimed_[k] = e;  // a claim counts once it is durable
    ++stats_.transactions;
    stats_.rows_absorbed += absorbed_in_tx_;
    rollback_state_after_commit();
  }
  void rollback_state_after_commit() {
    rows_.clear();
    staged_.clear();
    pending_claims_.clear();
    rows_sent_ = staged_sent_ = 0;
    absorbed_in_tx_ = 0;
    state_ = tx_state::idle;
  }

  // Ends the server's transaction, if one is open: ROLLBACK, or, if even that fails, the
  // connection (the server discards the transaction of a connection that is gone).
  void roll_back_on_server() const noexcept {
    if (!std::exchange(server_open_, false) || !db_.connected())
      return;
    try {
      db_.exec("ROLLBACK");
    } catch (...) {
      db_.drop();
    }
  }

  // The unit's rows were refused together with a record's SQLSTATE (`failure`): which record,
  // if any, is to blame? Every row of the unit (what earlier round trips of this transaction
  // sent too) is applied again, one statement each, in the order its record was applied, in
  // transactions that are rolled back; constraints keep their declared timing.
  // - The first statement refused is the first record that fails when the unit is applied in
  //   offset order: commit() throws row_failed naming it (its record_error nested), and the
  //   pipeline retries, dead-letters or stops on that record.
  // - If none is refused, the failure is a deferred constraint's, checked when the unit ends.
  //   A record is named only when the unit without it passes that check and the unit without
  //   any other record does not: one entry whose counterpart is missing is named, the two
  //   healthy halves of a pair never are (a unit of more than `diagnosis_chunk` rows is not
  //   searched so: that costs a transaction per row).
  // - Otherwise no record is to blame (no record is the one; or a conflict with a transaction
  //   that has ended since): `unit_refused`, the position unmoved, nothing dead-lettered.
  [[noreturn]] void diagnose(const result& failure) const {
    ++stats_.diagnoses;
    std::vector<detail::array_builder> arrays(diagnosis_chunk * arrays_per_statement);
    std::vector<const char*> values(arrays.size());
    // Queues the rows [from, to) of rows_ but `skip`, one statement each.
    const auto send_rows = [&](std::size_t from, std::size_t to, std::size_t skip) {
      for (std::size_t i = from, slot = 0; i < to; ++i) {
        if (i == skip)
          continue;
        detail::array_builder* a = arrays.data() + slot * arrays_per_statement;
        for (std::size_t c = 0; c < arrays_per_statement; ++c)
          a[c].clear();
        const pending_row& r = rows_[i];
        cols::add_to(a, r.row);
        a[cols::count].add(r.k.value());
        a[cols::count + 1].add(r.o.value());
        for (std::size_t c = 0; c < arrays_per_statement; ++c)
          values[slot * arrays_per_statement + c] = a[c].finish();
        db_.send_prepared(write_name, static_cast<int>(arrays_per_statement),
                          values.data() + slot * arrays_per_statement);
        ++slot;
      }
    };
    // Runs what is queued; the index of the first statement refused, if any.
    const auto first_refused = [&](std::string_view doing) -> std::optional<std::size_t> {
      ++stats_.round_trips;
      db_.run();
      std::vector<result>& results = db_.results();
      for (std::size_t i = 0; i < results.size(); ++i) {
        if (results[i].ok())
          continue;
        if (!is_record_failure(results[i].sqlstate())) {
          const result refused = std::move(results[i]);
          roll_back_on_server();
          db_.fail(refused, doing);
        }
        return i;
      }
      return std::nullopt;
    };
    const auto blame = [&](std::size_t i, std::string_view why, std::string_view sqlstate) {
      const pending_row& r = rows_[i];
      try {
        throw record_error(sqlstate,
                           detail::concat("the row of ", cols::key_text(r.row), ": ", why));
      } catch (...) {
        std::throw_with_nested(row_failed(r.k, r.o, std::string(why)));
      }
    };
    try {
      db_.ensure();
      server_open_ = true;
      db_.exec("BEGIN");
      for (std::size_t from = 0; from < rows_.size(); from += diagnosis_chunk) {
        const std::size_t to = std::min(rows_.size(), from + diagnosis_chunk);
        send_rows(from, to, to);
        if (const auto at = first_refused("applying the unit's rows one by one")) {
          const result refused = std::move(db_.results()[*at]);
          roll_back_on_server();
          blame(from + *at, refused.message(), refused.sqlstate());
        }
      }
      // Every row was taken alone: does the unit still fail its deferred constraints?
      db_.send("SET CONSTRAINTS ALL IMMEDIATE");
      const bool deferred = first_refused("checking the unit's deferred constraints").has_value();
      roll_back_on_server();
      if (deferred && rows_.size() <= diagnosis_chunk) {
        std::optional<std::size_t> culprit;
        std::string why;
        for (std::size_t skip = 0; skip < rows_.size(); ++skip) {
          server_open_ = true;
          db_.send("BEGIN");
          send_rows(0, rows_.size(), skip);
          db_.send("SET CONSTRAINTS ALL IMMEDIATE");
          const bool refused = first_refused("checking the unit without one row").has_value();
          roll_back_on_server();
          if (refused)
            continue;
          if (culprit) {  // two records either of which the unit passes without: neither
            culprit.reset();
            break;
          }
          culprit = skip;
        }
        if (culprit)
          blame(*culprit,
                detail::concat(failure.message(),
                               " (the unit passes its deferred constraints without this row "
                               "alone)"),
                failure.sqlstate());
      }
    } catch (...) {
      roll_back_on_server();
      throw;
    }
    throw unit_refused(failure.sqlstate(), failure.message());
  }

  mutable connection db_;
  sink_options options_;
  std::string table_;     ///< the data table, schema-qualified as the server resolves it
  std::string bound_to_;  ///< what the position rows vouch for: table_, and the source
  mutable tx_state state_ = tx_state::idle;
  mutable bool server_open_ = false;  ///< BEGIN was sent and nothing ended the transaction yet
  mutable bool commit_sent_ = false;  ///< this commit() sent COMMIT (its outcome may be unknown)
  mutable std::vector<pending_row> rows_;
  mutable std::size_t rows_sent_ = 0;
  mutable std::vector<staged_position> staged_;
  mutable std::size_t staged_sent_ = 0;
  std::map<partition_id, epoch> claimed_;
  std::map<partition_id, epoch> pending_claims_;
  std::optional<std::uint64_t> claimed_fingerprint_;  // of the last claim's answer
  mutable std::uint64_t absorbed_in_tx_ = 0;
  mutable sink_stats stats_;
  // Scratch, kept between transactions so a steady stream of units allocates nothing new.
  mutable std::vector<std::uint32_t> order_;
  mutable std::vector<std::uint32_t> sent_;
  mutable std::vector<std::uint32_t> bounds_;  ///< where each statement's rows start in sent_
  mutable std::vector<std::uint32_t> before_;  ///< the row of the same key before, per sent_
  mutable std::vector<std::uint32_t> absorbed_;
  mutable std::vector<std::pair<std::int64_t, std::int64_t>> changed_;
  mutable std::vector<detail::array_builder> arrays_;
  mutable std::vector<const char*> params_;
  mutable detail::array_builder position_arrays_[4];
  mutable const char* position_params_[6]{};
};

/// Idempotent, OffsetGuarded, PartitionScoped, Transactional: fit for every policy, and for a
/// table fed by many partitions.
template <describes_table D, durability_mode Durability = synced>
using guarded_upsert_sink = table_sink<D, guarded_upsert_mode, Durability>;
/// Idempotent, VersionGuarded<Member>, Transactional: fit for every policy, and it survives
/// repartitioning (the version, not the offset, decides).
template <describes_table D, auto Member, durability_mode Durability = synced>
using version_guarded_sink = table_sink<D, version_guarded_mode<Member>, Durability>;
/// Idempotent, Transactional, not OffsetGuarded: AtLeastOnce, AutoCommit; never
/// TransactionalPosition (rule R5).
template <describes_table D, durability_mode Durability = synced>
using upsert_sink = table_sink<D, upsert_mode, Durability>;
/// Not Idempotent: AtMostOnce only (rules R1, R3, R5).
template <describes_table D, durability_mode Durability = synced>
using append_sink = table_sink<D, append_mode, Durability>;

}  // namespace commit_order::postgres
