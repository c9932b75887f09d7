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
// Every row of a unit is sent, in the order its record was applied, and the server's guard
// (offset, version) and constraints decide what stays -- never an ordering of this code's,
// which could differ from the server's (a text version under a collation, a NaN); how the rows
// become statements is in unit_buffer.hpp. Constraints between the rows of one unit (a unique
// non-key column one row gives up and a later one takes, a parent before its children in the
// same table) behave as applying the records in offset order does. Two writers whose units
// share keys in different orders can deadlock (40P01); the sink redoes the unit (below), as
// it does a serialization failure.
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
//   the connection lost, the server shutting down (57P01/57P02), before COMMIT was sent:
//     `connection_lost`. Nothing of the transaction is left on the server. A unit whose
//     connection died so is sent once more on a new connection; otherwise the sink reopens the
//     connection at its next transaction and the pipeline redoes the unit.
//   the same after COMMIT was sent, before its answer arrived: `commit_in_doubt`. The
//     transaction may have committed; COMMIT is never sent again. Rows and positions went
//     together either way: recovery reads the position (the next claim) and resumes after the
//     unit or redoes it -- nothing lost, nothing applied twice.
//   disk full (53100), any other failure: infrastructure_error; the unit is redone.
// Outside a transaction apply() is its own transaction, and a refused row throws its
// `record_error` directly.
//
// ---- the parts -----------------------------------------------------------------------------
//   unit_buffer.hpp   the transaction's rows and positions, planned into statements
//   transaction.hpp   where the transaction stands with the server (one state), BEGIN's place,
//                     COMMIT, ROLLBACK, and the outcome of a COMMIT whose answer was lost
//   table_sql.hpp     the SQL of the data table's statements
//   refused_row.hpp   which record of a refused unit is to blame
//   this file         the sink: its calls, the round trips and the checks made on their
//                     answers, the applied watermark
// A const call sends nothing: applied_watermark() answers from what the sink read and
// committed, so pipeline::progress() costs no round trip.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "commit_order/adapters/detail/write_modes.hpp"
#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/position_table.hpp"
#include "commit_order/adapters/postgres/refused_row.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/adapters/postgres/table_sql.hpp"
#include "commit_order/adapters/postgres/text.hpp"
#include "commit_order/adapters/postgres/transaction.hpp"
#include "commit_order/adapters/postgres/unit_buffer.hpp"
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

}  // namespace detail

/// A sink writing rows of table D in write mode Mode, with the durability of durability mode
/// Durability (synced unless told otherwise). Not final: a test harness may derive from it to
/// pace or mark writes without re-declaring anything.
template <describes_table D, write_mode Mode = guarded_upsert_mode,
          durability_mode Durability = synced>
class table_sink : public detail::key_alias<D, Mode::keyed> {
  using cols = detail::columns_of<typename D::keys, typename D::values>;
  using sql = detail::table_sql<D, Mode>;
  using buffer = detail::unit_buffer<D, Mode>;
  using phase = detail::transaction::phase;
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
  ~table_sink() { rollback(); }

  /// Binds the position rows to the source they are read from as well as to the table (the
  /// pipeline calls it with the source's identity, before the first claim).
  void bind_source(const std::string& identity) {
    tx_.require_none("bind_source");
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
    if (!tx_.begun()) {
      apply_alone(k, source_offset, row);
      return;
    }
    tx_.require("apply()");
    unit_.add(k, source_offset, row);
  }

  // ---- transactions --------------------------------------------------------------------------

  /// Opens a transaction. Nothing is sent yet: BEGIN travels with the unit's rows.
  void begin() { tx_.begin(); }

  /// Sends what the transaction buffered, checks the fence, the positions and the guard, and
  /// commits (see above). Throws `fenced`, `key_moved_partition`, `row_failed` (a row refused
  /// for its values, naming its record), `commit_in_doubt` (the connection failed after COMMIT
  /// was sent) or an infrastructure_error; the transaction must then be rolled back.
  void commit() {
    if (!tx_.begun())
      throw std::logic_error("commit_order::postgres: commit() without begin()");
    tx_.require("commit()");
    // Nothing was sent before commit(): the sink holds the whole unit and can send it again.
    const bool whole = tx_.state() == phase::buffering;
    bool reconnected = false;
    for (std::size_t attempt = 0;; ++attempt) {
      try {
        if (tx_.state() == phase::buffering && unit_.empty()) {
          tx_.commit_nothing();  // an empty transaction: nothing to send
          finish_commit();
          return;
        }
        send_buffered();
        send_commit();
        finish_commit();
        return;
      } catch (const serialization_failure&) {
        if (!whole || attempt >= options_.serialization_retries) {
          tx_.fail();
          throw;
        }
        ++stats_.retries;
        // Held back a little longer each time, so the transaction it met can finish.
        std::this_thread::sleep_for(std::chrono::milliseconds(1) * (1 << attempt));
        restart_unit();
      } catch (const connection_lost&) {
        // A connection that died before COMMIT was sent took nothing of the unit with it (the
        // server discards an open transaction): the unit goes again, once, on a new
        // connection -- the server restarted, or ended an idle session, between two units. (A
        // COMMIT whose answer was lost is commit_in_doubt, never sent again.)
        if (!whole || reconnected) {
          tx_.fail();
          throw;
        }
        reconnected = true;
        restart_unit();
      } catch (...) {
        tx_.fail();
        throw;
      }
    }
  }

  /// Undoes everything since begin(): drops the buffered rows and positions, and rolls back
  /// what was sent. A no-op outside a transaction. If ROLLBACK fails, the connection is
  /// dropped, which ends the transaction on the server; the next transaction reconnects.
  void rollback() noexcept {
    unit_.clear();
    pending_claims_.clear();
    absorbed_in_tx_ = 0;
    tx_.rollback();
  }

  // ---- positions, per partition, inside the transaction --------------------------------------

  /// The position stored for partition `k` (none before the first commit of one). Inside a
  /// transaction, what it stored so far is sent first, so the answer includes it. Reads the
  /// applied watermark of `k` in the same round trip (see applied_watermark).
  [[nodiscard]] std::optional<position> load_position(partition_id k = partition_id{0}) {
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
  /// position; throws `fenced` when a newer owner holds it. Runs now (its answer is needed),
  /// with the read of `k`'s applied watermark in the same round trip.
  std::optional<position> claim(partition_id k, epoch e) {
    tx_.require("claim()");
    flush();
    std::string part, ep;
    detail::append_integer(part, k.value());
    detail::append_integer(ep, e.value());
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str(),
                            ep.c_str(), bound_to_.c_str()};
    db_.send_prepared(detail::position_sql::claim, 5, values);
    const bool watermark = queue_watermark(part);
    std::vector<result>& results = run_now(detail::position_sql::claim);
    const result& r = results[0];
    if (watermark)
      note_watermark(k, results[1]);
    if (r.rows() == 0)
      throw fenced(e, load_row(k).owner, k);
    check_binding(k, r, 1);
    claimed_fingerprint_ = fingerprint_in(r, 2);
    pending_claims_[k] = e;
    return r.is_null(0, 0) ? std::nullopt : std::optional{position{r.integer(0, 0)}};
  }

  /// Inside a transaction: raises partition `k`'s owner epoch by one in one statement (a
  /// consumer given no epoch of its own: the last one started owns it, the one before is
  /// fenced at its next commit). Reads `k`'s applied watermark in the same round trip.
  claimed claim_next(partition_id k) {
    tx_.require("claim_next()");
    flush();
    std::string part;
    detail::append_integer(part, k.value());
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str(),
                            bound_to_.c_str()};
    db_.send_prepared(detail::position_sql::claim_next, 4, values);
    const bool watermark = queue_watermark(part);
    std::vector<result>& results = run_now(detail::position_sql::claim_next);
    const result& r = results[0];
    if (watermark)
      note_watermark(k, results[1]);
    check_binding(k, r, 2);
    claimed_fingerprint_ = fingerprint_in(r, 3);
    const epoch e{r.integer(0, 0)};
    pending_claims_[k] = e;
    return claimed{e, r.is_null(0, 1) ? std::nullopt : std::optional{position{r.integer(0, 1)}}};
  }

  /// The epoch that owns partition `k`'s position row now (committed, or claimed in the open
  /// transaction), read from the server.
  [[nodiscard]] epoch owner_epoch(partition_id k = partition_id{0}) { return load_row(k).owner; }
  /// The epoch of the last claim of `k` whose transaction committed.
  [[nodiscard]] std::optional<epoch> claimed_epoch(partition_id k = partition_id{0}) const {
    const auto it = claimed_.find(k);
    return it == claimed_.end() ? std::nullopt : std::optional{it->second};
  }

  // ---- what a stream's owners share ----------------------------------------------------------

  /// The stream's era (see epoch::of), read from the server: raised only by `bump_era`.
  [[nodiscard]] std::int64_t era() {
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str()};
    const result r = exec(detail::position_sql::read_stream, 2, values);
    return r.rows() == 0 ? 0 : r.integer(0, 0);
  }

  /// Inside a transaction (the pipeline's claim): records `n` at the first claim; a different
  /// count later throws `partition_count_changed` -- keys may have moved between partitions,
  /// and an offset guard would compare offsets of unrelated partitions. A version-guarded sink
  /// records the new count instead: its guard does not depend on partitions.
  void check_partition_count(std::size_t n) {
    tx_.require("check_partition_count()");
    flush();
    std::string count;
    detail::append_integer(count, n);
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), count.c_str(),
                            Mode::version_guarded ? "true" : "false"};
    const result r = exec(detail::position_sql::count, 4, values);
    adapters::detail::check_recorded_count(static_cast<std::size_t>(r.integer(0, 0)), n);
  }

  /// The partition count the stream's first claim recorded (none before it), read from the
  /// server.
  [[nodiscard]] std::optional<std::size_t> partition_count() {
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str()};
    const result r = exec(detail::position_sql::read_stream, 2, values);
    if (r.rows() == 0 || r.is_null(0, 1))
      return std::nullopt;
    return static_cast<std::size_t>(r.integer(0, 1));
  }

  /// The operator's act when a consumer group was deleted and recreated (its generations
  /// restarted): every epoch of the new era is above every epoch of the old. Outside a
  /// transaction; returns the new era.
  std::int64_t bump_era() {
    require_between_units("bump_era()");
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str()};
    return exec(detail::position_sql::bump_era, 2, values).integer(0, 0);
  }

  /// The operator's acknowledgement of a repartitioned stream (after draining the old
  /// partitions): the next claim records the count it sees. Outside a transaction.
  void accept_partition_count() {
    require_between_units("accept_partition_count()");
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), nullptr};
    exec(detail::position_sql::accept_count, 3, values);
  }
  /// The same, naming the new count: a claim that sees another one still fails under the
  /// offset guard (the version guard records whatever count a claim sees).
  void accept_partition_count(std::size_t n) {
    require_between_units("accept_partition_count(n)");
    std::string count;
    detail::append_integer(count, n);
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), count.c_str()};
    exec(detail::position_sql::accept_count, 3, values);
  }

  // ---- progress ------------------------------------------------------------------------------

  /// The highest source offset of partition `k` in the table, as far as this sink knows what is
  /// durable there: read from the server by the last claim, claim_next or load_position of `k`
  /// (outside a transaction, or before it sent rows of its own), and raised by every
  /// transaction of this sink that commits. Sends nothing, so pipeline::progress() costs no
  /// round trip; inside a transaction it is the watermark of the last commit -- progress says
  /// what is durable, not what a transaction might still roll back. Rows another consumer
  /// commits to `k` show at the next claim or load. None before anything was read or
  /// committed for `k`.
  [[nodiscard]] std::optional<offset> applied_watermark(partition_id k = partition_id{
                                                            0}) const noexcept {
    const auto it = watermarks_.find(k);
    return it == watermarks_.end() ? std::nullopt : std::optional{it->second};
  }

  [[nodiscard]] const sink_stats& stats() const noexcept { return stats_; }
  [[nodiscard]] const sink_options& options() const noexcept { return options_; }
  /// The connection, for reading the table (and for tests). Outside a transaction only.
  [[nodiscard]] connection& database() noexcept { return db_; }

 private:
  static constexpr const char* write_name = "co_write";
  static constexpr const char* watermark_name = "co_watermark";
  static constexpr const char* moved_name = "co_moved";
  static constexpr std::size_t arrays_per_statement = buffer::arrays_per_statement;

  void stage(partition_id k, position p, epoch e, std::optional<std::uint64_t> fingerprint) {
    tx_.require("store_position()");
    unit_.stage(detail::staged_position{k, p, e, fingerprint});
  }

  // The fingerprint column of a claim's answer (stored as the same 64 bits, signed).
  static std::optional<std::uint64_t> fingerprint_in(const result& r, int column) {
    if (r.is_null(0, column))
      return std::nullopt;
    return adapters::detail::fingerprint_from_column(r.integer(0, column));
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

  // The row a claim returned is bound to this sink's table, or the claim is refused.
  void check_binding(partition_id k, const result& r, int column) const {
    if (r.is_null(0, column))
      return;
    const std::string held(r.text(0, column));
    if (adapters::detail::claim_refused(held, bound_to_)) [[unlikely]]
      throw_bound_elsewhere(k, held);
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_bound_elsewhere(partition_id k,
                                                                    const std::string& held) const {
    detail::throw_bound_elsewhere(k, options_.schema, options_.position_table, options_.stream,
                                  options_.topic, held, bound_to_);
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
  position_row load_row(partition_id k) {
    if (tx_.state() == phase::buffering || tx_.state() == phase::open)
      flush();  // read this transaction's own positions too
    else
      db_.ensure();  // no transaction on the server: a lost connection can be reopened
    std::string part;
    detail::append_integer(part, k.value());
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str()};
    db_.send_prepared(detail::position_sql::load, 3, values);
    const bool watermark = queue_watermark(part);
    std::vector<result>& results = run_now(detail::position_sql::load);
    if (watermark)
      note_watermark(k, results[1]);
    const result& r = results[0];
    position_row row;
    if (r.rows() != 0) {
      if (!r.is_null(0, 0))
        row.stored = position{r.integer(0, 0)};
      row.owner = epoch{r.integer(0, 1)};
    }
    return row;
  }

  // One statement, now, outside a pipeline (inside the transaction if one is open).
  // An operator's act commits on its own: inside a unit, the unit's rollback would take it back.
  void require_between_units(const char* what) const {
    if (tx_.state() != phase::idle)
      throw std::logic_error(detail::concat(
          "commit_order::postgres: ", what,
          " inside a transaction: an operator's act commits on its own, and rolling the unit "
          "back would take it back -- call it between units"));
  }

  result exec(const char* name, int count, const char* const* values) {
    if (!tx_.on_server())
      db_.ensure();  // no transaction on the server: a lost connection can be reopened
    ++stats_.round_trips;
    return db_.exec_prepared(name, count, values);
  }

  // Runs the statements queued as one round trip; the first one refused is thrown, classified,
  // as exec() throws it.
  std::vector<result>& run_now(const char* doing) {
    ++stats_.round_trips;
    db_.run();
    std::vector<result>& results = db_.results();
    for (const result& r : results)
      if (!r.ok())
        db_.fail(r, doing);
    return results;
  }

  // Queues the read of a partition's applied watermark (its text form `part`) when what it
  // returns is committed: nothing of this transaction's own rows is on the server yet.
  bool queue_watermark(const std::string& part) {
    if (unit_.rows_sent() && tx_.on_server())
      return false;
    const char* values[] = {part.c_str()};
    db_.send_prepared(watermark_name, 1, values);
    return true;
  }
  void note_watermark(partition_id k, const result& r) {
    if (r.rows() == 0 || r.is_null(0, 0))
      watermarks_.erase(k);
    else
      watermarks_.insert_or_assign(k, offset{r.integer(0, 0)});
  }

  // A call that needs the server's answer inside the transaction: whatever is buffered is
  // sent first (with BEGIN, if nothing was), so the call sees this transaction's own writes.
  void flush() {
    if (tx_.on_server() && !unit_.unsent())
      return;
    try {
      send_buffered();
    } catch (...) {
      tx_.fail();
      throw;
    }
  }

  // Outside a transaction: one row, one transaction.
  void apply_alone(partition_id k, offset o, const row_type& row) {
    begin();
    unit_.add(k, o, row);
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

  // Sends BEGIN (if the transaction is not open on the server yet), the fence, the unsent
  // rows and the staged positions in one round trip, reads every result, and checks the
  // fence, the positions and the guard. Returns with all of it in the open transaction; on a
  // failure the caller fails the transaction (which rolls it back on the server).
  void send_buffered() {
    const std::size_t chunks = unit_.prepare_rows(options_.rows_per_statement, stats_.key_splits);
    const bool positions = unit_.positions_unsent();
    const char* const* position_params =
        positions ? unit_.prepare_positions(options_.stream, options_.topic) : nullptr;
    if (tx_.on_server() && chunks == 0 && !positions)
      return;  // nothing to send

    // Queue: [BEGIN] [fence] chunk... [positions]. Indices of each in the results.
    std::size_t index = tx_.queue_begin() ? 1 : 0;
    const std::size_t fence_at = index;
    if (positions) {
      db_.send_prepared(detail::position_sql::fence, 3, position_params);
      ++index;
    }
    const std::size_t rows_at = index;
    for (std::size_t c = 0; c < chunks; ++c)
      db_.send_prepared(write_name, static_cast<int>(arrays_per_statement),
                        unit_.row_parameters(c));
    index += chunks;
    const std::size_t store_at = index;
    if (positions)
      db_.send_prepared(detail::position_sql::store, 6, position_params);
    ++stats_.round_trips;
    stats_.write_statements += chunks;
    stats_.rows_sent += unit_.sending().size();
    db_.run();
    std::vector<result>& results = db_.results();

    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].ok())
        continue;
      // The first statement that failed (the rest were skipped).
      const result failure = std::move(results[i]);
      tx_.fail();
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
    if constexpr (guarded) {
      const std::vector<std::uint32_t>& absorbed =
          unit_.absorbed(std::span<const result>(results).subspan(rows_at, chunks));
      if constexpr (scoped) {
        if (!absorbed.empty())
          check_moved(absorbed);
      }
      absorbed_in_tx_ += absorbed.size();
    }
    unit_.note_sent();
  }

  // Every staged partition is owned at the writer's epoch (the fence, on locked rows), and
  // the position statement changed exactly its row.
  void check_positions(const result& fence, const result& stored) {
    const std::span<const detail::staged_position> sent = unit_.unsent_positions();
    for (const detail::staged_position& s : sent) {
      epoch owner{0};
      for (int r = 0; r < fence.rows(); ++r)
        if (fence.integer(r, 0) == s.k.value())
          owner = epoch{fence.integer(r, 1)};
      bool changed = false;
      for (int r = 0; r < stored.rows(); ++r)
        changed = changed || stored.integer(r, 0) == s.k.value();
      if (owner != s.e || !changed) {
        tx_.fail();
        throw fenced(s.e, owner, s.k);
      }
    }
    if (stored.rows() != static_cast<int>(sent.size())) {
      tx_.fail();
      throw infrastructure_error("",
                                 "the position statement changed another number of rows "
                                 "than the partitions it stored");
    }
  }

  // Partition-scoped: an absorbed row whose stored row came from another partition is a moved
  // key, checked before COMMIT, in the same transaction.
  void check_moved(const std::vector<std::uint32_t>& absorbed) {
    std::vector<detail::array_builder> arrays(cols::key_count + 1);
    for (auto& a : arrays)
      a.clear();
    for (const std::uint32_t i : absorbed) {
      cols::add_key_to(arrays.data(), unit_.rows()[i].value);
      arrays[cols::key_count].add(unit_.rows()[i].k.value());
    }
    std::vector<const char*> values;
    for (auto& a : arrays)
      values.push_back(a.finish());
    db_.send_prepared(moved_name, static_cast<int>(values.size()), values.data());
    ++stats_.round_trips;
    db_.run();  // a lost connection: the caller fails the transaction
    const result r = std::move(db_.results().front());
    if (!r.ok()) {
      tx_.fail();
      db_.fail(r, "checking the absorbed rows' partitions");
    }
    if (r.rows() != 0) {
      const auto& incoming = unit_.rows()[absorbed[static_cast<std::size_t>(r.integer(0, 0) - 1)]];
      tx_.fail();
      throw key_moved_partition(
          cols::key_text(incoming.value),
          partition_id{static_cast<partition_id::value_type>(r.integer(0, 1))},
          offset{r.integer(0, 2)}, incoming.k, incoming.o);
    }
  }

  // COMMIT, in a round trip of its own, after every check was read. Its answer lost with the
  // connection is commit_in_doubt (the transaction object throws it, naming the positions).
  void send_commit() {
    ++stats_.round_trips;
    const result r = tx_.commit([this] { return unit_.stored_positions(); });
    if (r.ok())
      return;
    if (is_record_failure(r.sqlstate()))  // a deferred constraint: does one record fail?
      diagnose(r);
    if (is_serialization_failure(r.sqlstate()))
      throw serialization_failure(r.sqlstate(), r.message());
    throw infrastructure_error(r.sqlstate(), detail::concat("COMMIT: ", r.message()));
  }

  // The unit is sent again from the start (nothing of it is on the server).
  void restart_unit() {
    tx_.restart();
    unit_.resend();
    absorbed_in_tx_ = 0;
  }

  void finish_commit() {
    for (const auto& [k, e] : pending_claims_)
      claimed_[k] = e;  // a claim counts once it is durable
    for (const auto& [k, o] : unit_.present()) {
      const auto [it, added] = watermarks_.try_emplace(k, o);
      if (!added && it->second < o)
        it->second = o;
    }
    ++stats_.transactions;
    stats_.rows_absorbed += absorbed_in_tx_;
    unit_.clear();
    pending_claims_.clear();
    absorbed_in_tx_ = 0;
  }

  // The unit's rows were refused together with a record's SQLSTATE: which record, if any, is to
  // blame (refused_row.hpp)? Called once the transaction has failed (nothing of it is on the
  // server): the probes are transactions of their own, each rolled back.
  [[noreturn]] void diagnose(const result& failure) {
    ++stats_.diagnoses;
    detail::blame_refused_row<D, Mode>(db_, write_name, unit_.rows(), failure, stats_.round_trips);
  }

  connection db_;
  detail::transaction tx_{db_};  ///< where the transaction stands with the server
  buffer unit_;                  ///< what it holds: the unit's rows and positions
  sink_options options_;
  std::string table_;     ///< the data table, schema-qualified as the server resolves it
  std::string bound_to_;  ///< what the position rows vouch for: table_, and the source
  std::map<partition_id, epoch> claimed_;
  std::map<partition_id, epoch> pending_claims_;
  std::optional<std::uint64_t> claimed_fingerprint_;  // of the last claim's answer
  /// Per partition, the highest source offset known durable in the table (applied_watermark).
  std::map<partition_id, offset> watermarks_;
  std::uint64_t absorbed_in_tx_ = 0;
  sink_stats stats_;
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
