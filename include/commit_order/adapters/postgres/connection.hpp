// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/connection.hpp — a libpq connection that throws typed errors,
// sends several statements in one round trip (pipeline mode), reconnects after the server went
// away, and runs at a declared durability it has checked with the server.
#pragma once

#include <libpq-fe.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/adapters/classified.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/adapters/postgres/text.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::postgres {

// ---- a failure is the record's or the world's ----------------------------------------------
//
// The pipeline acts on a record's failure (retries it, dead-letters it, or stops naming it) and
// never on the world's (docs/reference.md, "Errors"). Every failed statement is classified by its
// SQLSTATE:
//
// The record's -- `record_error`: the row this record makes is refused, where another record's
// row would not be.
//   class 23 (integrity constraint violation: 23502 not null, 23503 foreign key, 23505 unique,
//     23514 check, 23P01 exclusion): a constraint the row violates. The keyed sinks' own
//     conflict on their key never surfaces: the upsert absorbs it.
//   class 22 (data exception: 22001 string too long, 22003 out of range, 22021 bad byte
//     sequence, 22P02 invalid text, ...): a value the column cannot take.
//
// The world's -- `infrastructure_error` (and `connection_lost`, `commit_in_doubt`,
// `durability_mismatch`, `serialization_failure`): every other SQLSTATE, and every failure with
// none (libpq's own: the connection was lost). In particular
//   08xxx, a lost connection, 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect
//     now: the server went away; the sink reconnects at its next transaction. After COMMIT
//     was sent, the same is `commit_in_doubt`: the transaction may have committed.
//   53xxx (53100 disk full, 53200 out of memory, 53300 too many connections), 58xxx (I/O), XX:
//     the server cannot do its job, for any record.
//   40001 serialization failure, 40P01 deadlock: retried by the sink with the whole unit (see
//     sink.hpp); `serialization_failure` once the retries are used up.
//   55P03 lock timeout, 57014 statement timeout or cancel, 25xxx transaction state: the
//     transaction could not finish, whatever its rows.
//   42xxx (syntax, undefined table or column, 42501 insufficient privilege), 0A000: the
//     statement or the schema is wrong, for every record alike.
//   21000 (an upsert touching one row twice): the sink never sends a key twice in one
//     statement, so this is a bug of the sink, never of a record.
// An unknown SQLSTATE is the world's: a healthy record wrongly blamed under dead_letter<N> is
// skipped for good, while a stop wrongly blamed on the world only delays the stream.

/// True when a failure with this SQLSTATE is the record's (see above).
[[nodiscard]] constexpr bool is_record_failure(std::string_view sqlstate) noexcept {
  return sqlstate.size() == 5 && (sqlstate.starts_with("23") || sqlstate.starts_with("22"));
}

/// The SQLSTATE a failure carries (empty when libpq itself failed: a lost connection). Every
/// error this adapter throws for a failed call derives from it, beside its std::exception base;
/// `blame()` says whether it is the record's failure or the world's
/// (adapters/classified.hpp).
class sqlstate_code : public adapters::classified_failure {
 public:
  using code_type = std::string_view;
  static constexpr std::string_view prefix = "commit_order::postgres: ";
  [[nodiscard]] static constexpr bool is_record_failure(std::string_view code) noexcept {
    return postgres::is_record_failure(code);
  }

  /// The five-character SQLSTATE ("23505", "40001"), or "" for a client-side failure.
  [[nodiscard]] std::string_view sqlstate() const noexcept { return {code_, std::strlen(code_)}; }

 protected:
  sqlstate_code(std::string_view code, adapters::fault blame) noexcept : classified_failure(blame) {
    // No memcpy: an empty view may hold a null pointer, which memcpy must never be given.
    const std::size_t n = code.size() < 5 ? code.size() : 5;
    for (std::size_t i = 0; i < n; ++i)
      code_[i] = code[i];
    code_[n] = '\0';
  }
  /// Blamed as the code classifies (an error of one's own that carries a SQLSTATE).
  explicit sqlstate_code(std::string_view code) noexcept
      : sqlstate_code(code,
                      is_record_failure(code) ? adapters::fault::record : adapters::fault::world) {}

 private:
  char code_[6]{};
};

/// A statement failed for a reason that is not the record's (see above): the pipeline rolls
/// the unit back and propagates it with the position unmoved.
class infrastructure_error : public adapters::world_failure<sqlstate_code> {
 public:
  /// `sqlstate`: the server's code ("" for a client-side failure); `what`: the message, after
  /// the adapter's prefix.
  using world_failure::world_failure;
};

/// The row a record makes was refused for its values (see above): the record's failure, which
/// the pipeline's error handling (stop, retry<N>, dead_letter<N>) acts on.
class record_error final : public adapters::record_failure<sqlstate_code> {
 public:
  using record_failure::record_failure;
};

/// A serialization failure (40001) or deadlock (40P01) that the sink's retries of the whole
/// unit did not get past: the unit is rolled back, the position held, and the next poll redoes
/// it.
class serialization_failure final : public infrastructure_error {
 public:
  using infrastructure_error::infrastructure_error;
};

/// The unit's rows were refused together, but no record fails when they are applied one by
/// one in offset order: a deferred constraint that only the unit as a whole violates (one entry
/// of a pair whose other half is missing), or a conflict with a transaction that has ended
/// since. No record is to blame, so none is retried, dead-lettered or named: the unit is
/// rolled back and the position held. Redoing the unit (a restart, or `retry_world`) gets past
/// a conflict that has gone; a unit that violates a constraint stays refused until its data or
/// the constraint is mended. `sqlstate()` and the message are the server's for the unit.
class unit_refused final : public infrastructure_error {
 public:
  unit_refused(std::string_view sqlstate, std::string_view why)
      : infrastructure_error(
            sqlstate, detail::concat("the unit's rows were refused together (", why,
                                     ") but no record is refused when they are applied one by "
                                     "one in offset order: no record is to blame; the unit is "
                                     "rolled back and its position held")) {}
};

/// The connection failed (the server went away, shut down, or the network broke): whatever
/// the connection had open on the server is gone. The sink reopens it at its next transaction.
class connection_lost final : public infrastructure_error {
 public:
  using infrastructure_error::infrastructure_error;
};

/// The server acknowledged a COMMIT after its wait for a synchronous standby was cancelled
/// (57014): committed on the primary only, not with the durability the sink's mode declares.
/// Its outcome is in doubt in the sense that matters: done again, the unit would be applied
/// twice, so it is never retried in place (outcome_unknown); recovery reads the position the
/// commit stored.
class commit_not_replicated final : public infrastructure_error,
                                    public commit_order::outcome_unknown {
 public:
  using infrastructure_error::infrastructure_error;
};

/// COMMIT was sent and the connection failed before its answer arrived (the server went away,
/// the network broke, the session was ended): the transaction may have committed or not, and
/// nothing on this side can tell (libpqxx's in_doubt_error). It is not connection_lost, which
/// says that nothing of the transaction is left, and the COMMIT is never sent again. The
/// world's failure: the pipeline rolls the unit back and recovers at its next poll. A sink's
/// rows and positions commit together, so the position stored for a partition the transaction
/// stored says which: recovery reads it (a claim) and resumes after the unit if it committed,
/// or from the unit if not -- nothing is lost and nothing applied twice. `positions()` are the
/// positions the transaction stored, for a caller who reads them back itself.
class commit_in_doubt final : public infrastructure_error, public commit_order::outcome_unknown {
 public:
  /// A position the transaction in doubt stored.
  struct stored final {
    partition_id partition;
    commit_order::position at;
    friend bool operator==(const stored&, const stored&) = default;
  };

  commit_in_doubt(std::string_view sqlstate, std::string_view why, std::vector<stored> positions)
      : infrastructure_error(
            sqlstate, detail::concat("COMMIT was sent and the connection failed before its answer "
                                     "arrived (",
                                     why,
                                     "): whether the transaction committed is unknown -- the "
                                     "positions it stored say which, and recovery reads them"))
      , positions_(std::make_shared<const std::vector<stored>>(std::move(positions))) {}

  /// The positions the transaction stored (none for a transaction that stored none: its rows
  /// are then absorbed by the guard, or rewritten, when the unit is redone).
  [[nodiscard]] std::span<const stored> positions() const noexcept { return *positions_; }

 private:
  // Shared: copying an exception must not throw.
  std::shared_ptr<const std::vector<stored>> positions_;
};

/// True for the failures a retry of the same transaction can get past.
[[nodiscard]] constexpr bool is_serialization_failure(std::string_view sqlstate) noexcept {
  return sqlstate == "40001" || sqlstate == "40P01";
}

namespace detail {

/// Throws the classified error. Cold and out of line: a message is only built after a call
/// failed.
[[noreturn, gnu::cold, gnu::noinline]] inline void raise(std::string_view sqlstate,
                                                         const std::string& what) {
  if (is_serialization_failure(sqlstate))
    throw serialization_failure(sqlstate, what);
  adapters::detail::raise_classified<record_error, infrastructure_error>(sqlstate, what);
}

struct result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
struct connection_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};

/// Notices ("relation already exists, skipping") are not errors, and this adapter has nobody
/// to print them to -- except one: a COMMIT whose wait for a synchronous standby was cancelled
/// (pg_cancel_backend, statement_timeout) returns success with a WARNING that it "might not
/// have been replicated". `flag` records it (see connection::run).
inline void receive_notice(void* flag, const PGresult* r) {
  const char* m = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  if (m != nullptr &&
      std::string_view(m).find("wait for synchronous replication") != std::string_view::npos)
    *static_cast<bool*>(flag) = true;
}

inline std::string trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

}  // namespace detail

/// One result of one statement.
class result final {
 public:
  result() = default;
  explicit result(PGresult* r) noexcept : r_(r) {}

  [[nodiscard]] ExecStatusType status() const noexcept {
    return r_ ? PQresultStatus(r_.get()) : PGRES_FATAL_ERROR;
  }
  /// True for a statement that ran (with or without rows).
  [[nodiscard]] bool ok() const noexcept {
    const ExecStatusType s = status();
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  }
  /// True for a statement skipped because an earlier one of its pipeline failed.
  [[nodiscard]] bool aborted() const noexcept { return status() == PGRES_PIPELINE_ABORTED; }
  [[nodiscard]] int rows() const noexcept { return r_ ? PQntuples(r_.get()) : 0; }
  [[nodiscard]] bool is_null(int row, int column) const noexcept {
    return PQgetisnull(r_.get(), row, column) != 0;
  }
  [[nodiscard]] std::string_view text(int row, int column) const noexcept {
    return {PQgetvalue(r_.get(), row, column),
            static_cast<std::size_t>(PQgetlength(r_.get(), row, column))};
  }
  /// The value of an integer column (BIGINT, INTEGER).
  [[nodiscard]] std::int64_t integer(int row, int column) const {
    const std::string_view t = text(row, column);
    std::int64_t v = 0;
    const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (error != std::errc() || end != t.data() + t.size())
      throw infrastructure_error(
          "", detail::concat("the server returned '", t, "' where an integer was expected"));
    return v;
  }
  /// The statement's row count ("UPDATE 3" -> 3).
  [[nodiscard]] std::int64_t affected() const noexcept {
    const char* n = r_ ? PQcmdTuples(r_.get()) : "";
    return n[0] == '\0' ? 0 : std::strtoll(n, nullptr, 10);
  }
  /// The SQLSTATE of a failed statement ("" when libpq itself failed).
  [[nodiscard]] std::string_view sqlstate() const noexcept {
    const char* s = r_ ? PQresultErrorField(r_.get(), PG_DIAG_SQLSTATE) : nullptr;
    return s != nullptr ? std::string_view(s) : std::string_view();
  }
  [[nodiscard]] std::string message() const {
    return detail::trimmed(r_ ? PQresultErrorMessage(r_.get()) : "no result");
  }
  [[nodiscard]] PGresult* get() const noexcept { return r_.get(); }

 private:
  std::unique_ptr<PGresult, detail::result_deleter> r_;
};

// ---- durability ----------------------------------------------------------------------------
//
// What an acknowledged COMMIT survives depends on three server settings:
//   synchronous_commit  off: COMMIT returns before its WAL is written; a server crash (not
//                       only a power cut) loses the last commits. Not offered. Any other
//                       value (local, remote_write, on, remote_apply) writes and flushes the
//                       commit's WAL locally before COMMIT returns.
//   fsync               off: the flush is skipped; the commit is in the operating system's
//                       page cache, which survives the server's crash but not the machine's.
//   full_page_writes    off: a page torn by a power cut cannot be repaired from the WAL; the
//                       documentation allows it only on storage that cannot tear pages.
// synchronous_commit is the session's own setting: the connection sets it to `on` and reads it
// back. fsync and full_page_writes are the server's: the connection reads them and refuses to
// run a durability its type declares if they do not give it.
//
//   postgres::replicated  Replicated: what synced gives, and synchronous_standby_names names at
//                       least one standby, so a COMMIT under synchronous_commit=on returns
//                       only once a synchronous standby has flushed its WAL too. Which standby
//                       acknowledged is the server's business; the connection reads the
//                       settings back, and counts the standbys pg_stat_replication shows in
//                       sync, when it connects (and reconnects). A standby lost later makes
//                       COMMIT wait; a cancelled wait, which the server acknowledges with a
//                       warning, is an error whose outcome is in doubt (connection::run).
//   postgres::synced    Synced: fsync=on, full_page_writes=on, synchronous_commit on.
//   postgres::buffered  Buffered: synchronous_commit on, whatever fsync says (an acknowledged
//                       commit survives a crash of the consumer and of the server process, not
//                       a power cut when fsync is off).

/// Replicated: every acknowledged commit was flushed to the server's disk and to a synchronous
/// standby's. As durable as a replicated Kafka topic: AtLeastOnce with Kafka's committed
/// offsets as the position store needs it (rule R9a).
struct replicated final {
  using durability = Replicated;
  // (A COMMIT whose standby wait was cancelled is refused too: connection::run.)
  static constexpr bool needs_fsync = true;
  static constexpr bool needs_standby = true;
  static constexpr std::string_view name = "replicated";
};
/// Synced: every acknowledged commit was flushed to the server's disk. The default.
struct synced final {
  using durability = Synced;
  static constexpr bool needs_fsync = true;
  static constexpr bool needs_standby = false;
  static constexpr std::string_view name = "synced";
};
/// Buffered: every acknowledged commit was written to the server's operating system.
struct buffered final {
  using durability = Buffered;
  static constexpr bool needs_fsync = false;
  static constexpr bool needs_standby = false;
  static constexpr std::string_view name = "buffered";
};

template <class M>
concept durability_mode =
    std::is_same_v<M, replicated> || std::is_same_v<M, synced> || std::is_same_v<M, buffered>;

/// What the server runs with, as it reports it.
struct effective_durability final {
  std::string synchronous_commit;
  std::string fsync;
  std::string full_page_writes;
  std::string synchronous_standby_names;
  /// Standbys pg_stat_replication shows in sync now (sync or quorum); -1 when this role may
  /// not see them (it needs pg_read_all_stats, e.g. through pg_monitor).
  std::int64_t synchronous_standbys = -1;
};

/// True when a server running with `d` gives what durability mode `M` declares.
template <durability_mode M>
[[nodiscard]] bool gives(const effective_durability& d) noexcept {
  if (d.synchronous_commit == "off")
    return false;
  if constexpr (M::needs_standby) {
    // Under local or remote_write, COMMIT returns before a standby has flushed.
    if (d.synchronous_commit != "on" && d.synchronous_commit != "remote_apply")
      return false;
    if (d.synchronous_standby_names.find_first_not_of(" \t") == std::string::npos)
      return false;
    // A name no standby has (a typo, a standby gone) would make every COMMIT wait, and a
    // cancelled wait acknowledges a commit no standby holds.
    if (d.synchronous_standbys < 1)
      return false;
  }
  if constexpr (M::needs_fsync)
    return d.fsync == "on" && d.full_page_writes == "on";
  return true;
}

/// The server does not give the durability the sink's or store's type declares: the type
/// would be a lie, so the connection is refused.
class durability_mismatch final : public infrastructure_error {
 public:
  durability_mismatch(std::string_view wanted, const effective_durability& got)
      : infrastructure_error(
            "", detail::concat(
                    "the server runs with fsync=", got.fsync, ", full_page_writes=",
                    got.full_page_writes, ", synchronous_commit=", got.synchronous_commit,
                    ", synchronous_standby_names='", got.synchronous_standby_names,
                    "', which does not give what the '", wanted,
                    "' durability mode declares (Synced needs fsync=on and full_page_writes=on; "
                    "Replicated needs those, a standby named in synchronous_standby_names and "
                    "streaming in sync (",
                    commit_order::detail::decimal(got.synchronous_standbys),
                    " in pg_stat_replication; -1: this role may not read it, grant it "
                    "pg_monitor); every mode needs synchronous_commit other than off) -- run "
                    "the server with those settings, or declare a weaker mode "
                    "(postgres::synced, postgres::buffered)"))
      , got_(got) {}

  [[nodiscard]] const effective_durability& actual() const noexcept { return got_; }

 private:
  effective_durability got_;
};

struct connection_options final {
  /// A libpq connection string or URI ("host=/tmp/pg dbname=app", "postgresql://...").
  std::string conninfo;
  /// The schema the tables live in (empty: the server's search_path). Created when missing if
  /// `create_schema`.
  std::string schema;
  bool create_schema = true;
  /// How long a statement waits for another transaction's row lock (lock_timeout) before
  /// failing with 55P03, an infrastructure_error: a claim never waits for ever behind a stuck
  /// consumer. 0: no limit.
  std::chrono::milliseconds lock_timeout{10000};
  /// The server ends a session left idle inside a transaction this long
  /// (idle_in_transaction_session_timeout): a paused zombie's transaction cannot hold its
  /// position rows for ever. 0: no limit.
  std::chrono::milliseconds idle_in_transaction_timeout{60000};
  /// connect_timeout, unless the connection string says otherwise.
  std::chrono::seconds connect_timeout{10};
};

/// One connection to one database, with the session settings and prepared statements the
/// sinks rely on; after it was lost (the server restarted, the network broke) the next
/// `ensure()` opens a new one with the same settings and statements.
class connection final {
 public:
  /// Connects and checks that the server gives durability mode `Mode` (durability_mismatch
  /// otherwise). Throws infrastructure_error when the server cannot be reached.
  template <durability_mode Mode>
  static connection open(connection_options options) {
    connection c(std::move(options), Mode::name, &gives<Mode>, Mode::needs_standby);
    c.connect();
    return c;
  }

  connection(connection&&) noexcept = default;
  connection& operator=(connection&&) noexcept = default;

  /// Opens a new connection if the last one was lost; throws infrastructure_error when the
  /// server cannot be reached (the caller's unit is redone later). Called only where no
  /// transaction is open: every other call fails on a lost connection rather than reconnect,
  /// or a statement meant for a transaction the server has discarded would run on its own.
  void ensure() {
    if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK)
      connect();
  }

  /// True while the connection is up, as far as the last call could tell.
  [[nodiscard]] bool connected() const noexcept {
    return conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
  }

  /// True when the server may hold a transaction of this connection open, as of the last
  /// answer read (a transaction open or failed; or statements whose answers are unread).
  [[nodiscard]] bool in_transaction() const noexcept {
    if (!connected())
      return false;
    const PGTransactionStatusType s = PQtransactionStatus(conn_.get());
    return s != PQTRANS_IDLE && s != PQTRANS_UNKNOWN;
  }

  /// Drops the connection; the server rolls back whatever transaction it had open.
  void drop() noexcept { conn_.reset(); }

  /// How many times a connection was opened (1 after open(); more after reconnects).
  [[nodiscard]] std::size_t connects() const noexcept { return connects_; }

  /// Prepares `sql` as `name` now and again after every reconnect.
  void prepare(std::string name, std::string sql) {
    ensure();
    prepare_now(name, sql);
    statements_.emplace_back(std::move(name), std::move(sql));
  }

  /// Runs `sql` (one or more statements, no parameters) outside a pipeline. Schema set-up,
  /// not a hot path.
  result exec(const std::string& sql) {
    require_connected();
    result r(PQexec(conn_.get(), sql.c_str()));
    if (!r.ok())
      fail(r, sql);
    refuse_unreplicated_commit();
    return r;
  }

  /// Runs prepared statement `name` with text parameters, outside a pipeline.
  result exec_prepared(const char* name, int count, const char* const* values) {
    require_connected();
    result r(PQexecPrepared(conn_.get(), name, count, values, nullptr, nullptr, 0));
    if (!r.ok())
      fail(r, name);
    refuse_unreplicated_commit();
    return r;
  }

  // ---- pipelines: several statements, one round trip ---------------------------------------

  /// Queues prepared statement `name` with text parameters.
  void send_prepared(const char* name, int count, const char* const* values) {
    enter_pipeline();
    if (PQsendQueryPrepared(conn_.get(), name, count, values, nullptr, nullptr, 0) != 1)
      lost("queue a statement");
    ++queued_;
  }
  /// Queues `sql`, which takes no parameters (BEGIN, COMMIT, ROLLBACK, SET ...).
  void send(const char* sql) {
    enter_pipeline();
    if (PQsendQueryParams(conn_.get(), sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1)
      lost("queue a statement");
    ++queued_;
  }
  /// Sends everything queued and reads one result per statement, in order (`results()`).
  /// A statement after a failed one is skipped by the server (`aborted()`). Throws
  /// infrastructure_error only when the connection itself failed; a failed statement is the
  /// caller's to judge.
  void run() {
    const std::size_t n = std::exchange(queued_, 0);
    results_.clear();
    if (PQpipelineSync(conn_.get()) != 1)
      lost("send a pipeline");
    for (std::size_t i = 0; i < n; ++i) {
      PGresult* r = PQgetResult(conn_.get());
      if (r == nullptr)
        lost("read a result");
      results_.emplace_back(r);
      // A statement's results end with a null: its end marker in pipeline mode.
      while (PGresult* extra = PQgetResult(conn_.get()))
        PQclear(extra);
      if (results_.back().status() == PGRES_FATAL_ERROR && going_away(results_.back()))
        lost_with(results_.back());
    }
    result sync(PQgetResult(conn_.get()));
    if (sync.status() != PGRES_PIPELINE_SYNC)
      lost("read the end of a pipeline");
    if (PQexitPipelineMode(conn_.get()) != 1)
      lost("leave pipeline mode");
    refuse_unreplicated_commit();
  }
  [[nodiscard]] std::vector<result>& results() noexcept { return results_; }
  /// Statements queued since the last run().
  [[nodiscard]] std::size_t queued() const noexcept { return queued_; }

  /// Throws the classified error for a failed statement.
  [[noreturn, gnu::cold, gnu::noinline]] void fail(const result& r, std::string_view doing) {
    // The server said it is going away (57P01 admin shutdown, 57P02 crash shutdown, 57P03
    // starting up, 08xxx): whatever libpq noticed yet, this connection is done.
    if (going_away(r))
      lost_with(r);
    detail::raise(r.sqlstate(), detail::concat(doing, ": ", r.message()));
  }

  /// What the server runs with.
  [[nodiscard]] effective_durability durability() {
    result r = exec(
        "SELECT current_setting('synchronous_commit'), current_setting('fsync'),"
        " current_setting('full_page_writes'), current_setting('synchronous_standby_names'),"
        " CASE WHEN pg_has_role('pg_read_all_stats', 'USAGE') THEN (SELECT count(*) FROM"
        " pg_stat_replication WHERE sync_state IN ('sync', 'quorum')) ELSE -1 END");
    return {std::string(r.text(0, 0)), std::string(r.text(0, 1)), std::string(r.text(0, 2)),
            std::string(r.text(0, 3)), r.integer(0, 4)};
  }

  [[nodiscard]] PGconn* get() const noexcept { return conn_.get(); }

  /// The database this connection is to, as libpq resolved it (empty while disconnected).
  [[nodiscard]] std::string database_name() const {
    const char* d = conn_ ? PQdb(conn_.get()) : nullptr;
    return d == nullptr ? std::string() : std::string(d);
  }
  [[nodiscard]] const connection_options& options() const noexcept { return options_; }

 private:
  using check_fn = bool (*)(const effective_durability&) noexcept;

  // The server said it is going away (57P01 admin shutdown, 57P02 crash shutdown, 57P03
  // starting up, 08xxx), or libpq lost the connection: whatever libpq noticed yet, this
  // connection is done.
  bool going_away(const result& r) const noexcept {
    const std::string_view code = r.sqlstate();
    return !connected() || code.starts_with("08") || code.starts_with("57P");
  }

  // Under a mode that needs a standby, a commit the server acknowledged after its wait for the
  // standby was cancelled is committed on the primary only: the durability the type declares
  // was not given. The outcome is reported as in doubt, as a lost COMMIT reply is: the caller
  // does not go on as if it were replicated (AtLeastOnce commits no position after it, and
  // replays; recovery reads the sink's position, whose later commits wait for the standby).
  void refuse_unreplicated_commit() {
    if (!std::exchange(*sync_wait_cancelled_, false) || !needs_standby_)
      return;
    throw commit_not_replicated(
        "57014", detail::concat("the server acknowledged a COMMIT whose wait for its synchronous "
                                "standby was cancelled: committed on the primary only, not what "
                                "the '",
                                mode_, "' durability mode declares -- its outcome is in doubt"));
  }

  connection(connection_options options, std::string_view mode, check_fn check,
             bool needs_standby = false)
      : options_(std::move(options)), mode_(mode), check_(check), needs_standby_(needs_standby) {
    if (!options_.schema.empty() && !is_identifier(options_.schema))
      throw std::invalid_argument(detail::concat("commit_order::postgres: the schema name '",
                                                 options_.schema, "' is not a plain identifier"));
  }

  void connect() {
    conn_.reset();
    queued_ = 0;
    // The connection string's own settings win over these defaults (expand_dbname: the
    // string's values override earlier keywords).
    std::string timeout;
    detail::append_integer(timeout, options_.connect_timeout.count());
    const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {timeout.c_str(), "commit_order", options_.conninfo.c_str(), nullptr};
    conn_.reset(PQconnectdbParams(keys, values, 1));
    if (!conn_)
      throw infrastructure_error("", "out of memory opening a connection");
    if (PQstatus(conn_.get()) != CONNECTION_OK) {
      const std::string why = detail::trimmed(PQerrorMessage(conn_.get()));
      conn_.reset();
      throw connection_lost("08001", detail::concat("cannot connect: ", why));
    }
    PQsetNoticeReceiver(conn_.get(), &detail::receive_notice, sync_wait_cancelled_.get());
    ++connects_;
    // READ COMMITTED: every invariant here is a single-row predicate checked on a locked row
    // (the offset guard, the owner epoch, the position), which READ COMMITTED evaluates on the
    // latest committed version; stricter levels add only 40001s to retry.
    std::string settings =
        "SET synchronous_commit = on; SET default_transaction_isolation = 'read committed';"
        " SET client_min_messages = warning; SET lock_timeout = ";
    detail::append_integer(settings, options_.lock_timeout.count());
    settings.append("; SET idle_in_transaction_session_timeout = ");
    detail::append_integer(settings, options_.idle_in_transaction_timeout.count());
    settings.append(";");
    if (!options_.schema.empty()) {
      // IF NOT EXISTS is not safe against a concurrent CREATE SCHEMA (both pass the check, the
      // second fails on a unique index): members starting together serialize on the lock the
      // table creation takes too, and the second finds the schema there.
      if (options_.create_schema)
        settings.append(detail::concat(
            " BEGIN; SELECT pg_advisory_xact_lock(7206164131); CREATE SCHEMA IF NOT EXISTS ",
            detail::quote_identifier(options_.schema), "; COMMIT;"));
      settings.append(
          detail::concat(" SET search_path TO ", detail::quote_identifier(options_.schema), ";"));
    }
    exec(settings);
    // Read back: what the type declares must be what runs.
    const effective_durability got = durability();
    if (!check_(got)) {
      conn_.reset();
      throw durability_mismatch(mode_, got);
    }
    for (const auto& [name, sql] : statements_)
      prepare_now(name, sql);
  }

  void prepare_now(const std::string& name, const std::string& sql) {
    result r(PQprepare(conn_.get(), name.c_str(), sql.c_str(), 0, nullptr));
    if (!r.ok())
      fail(r, detail::concat("prepare '", sql, "'"));
  }

  void require_connected() {
    if (!connected())
      lost("use the connection");
  }

  void enter_pipeline() {
    require_connected();
    if (queued_ == 0 && PQpipelineStatus(conn_.get()) == PQ_PIPELINE_OFF) {
      if (PQenterPipelineMode(conn_.get()) != 1)
        lost("enter pipeline mode");
    }
  }

  [[noreturn, gnu::cold, gnu::noinline]] void lost(std::string_view doing) {
    const std::string why = conn_ ? detail::trimmed(PQerrorMessage(conn_.get())) : "no connection";
    conn_.reset();
    queued_ = 0;
    throw connection_lost("08006", detail::concat("the connection failed (", doing, "): ", why,
                                                  "; it is reopened next time"));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void lost_with(const result& r) {
    const std::string why = r.message();
    const std::string code(r.sqlstate().empty() ? std::string_view("08006") : r.sqlstate());
    conn_.reset();
    queued_ = 0;
    throw connection_lost(
        code, detail::concat("the connection failed: ", why, "; it is reopened next time"));
  }

  connection_options options_;
  std::string mode_;
  check_fn check_;
  bool needs_standby_ = false;
  // Set by the notice receiver (its address must survive a move of the connection).
  std::unique_ptr<bool> sync_wait_cancelled_ = std::make_unique<bool>(false);
  std::unique_ptr<PGconn, detail::connection_deleter> conn_;
  std::vector<std::pair<std::string, std::string>> statements_;
  std::vector<result> results_;
  std::size_t queued_ = 0;
  std::size_t connects_ = 0;
};

}  // namespace commit_order::postgres
