// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/connection.hpp — a SQLite connection and its prepared
// statements, as RAII types that throw typed errors instead of returning codes; the durability
// modes a connection can run in; and which failures are a record's and which the world's.
//
// The durability of every write made through a connection is fixed when it is opened, by a
// compile-time durability mode that names both the journal mode and the synchronous level
// (wal_full, delete_extra, ...): what a sink or store declares (Synced, Buffered) is what
// that combination does across a power cut, and the connection reads both settings back after
// setting them and refuses to run under any other.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "commit_order/adapters/classified.hpp"
#include "commit_order/adapters/sqlite/text.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::sqlite {

// ---- a failure is the record's or the world's ------------------------------------------------
//
// The pipeline acts on a record's failure (retries it, dead-letters it, or stops naming it)
// and never on the world's (docs/reference.md, "Errors"): an infrastructure_error is not retried as
// the record's, never dead-lettered, and the position does not move past it. Every failed SQLite
// call is classified by its extended result code:
//
// The record's -- `record_error`, NOT an infrastructure_error: the row this record makes is
// refused, where another record's row would not be.
//   SQLITE_CONSTRAINT_CHECK, _NOTNULL, _UNIQUE, _PRIMARYKEY, _FOREIGNKEY, _TRIGGER, _DATATYPE,
//   _FUNCTION, _ROWID (and a bare SQLITE_CONSTRAINT): a constraint the row violates. The
//   keyed sinks' own conflict on their key never surfaces: the upsert absorbs it.
//   SQLITE_MISMATCH: a value of the wrong type for its column.
//   SQLITE_TOOBIG: a string longer than SQLITE_LIMIT_LENGTH.
//
// The world's -- `infrastructure_error` (and `rollback_error`, `durability_mismatch`): every
// other code, in particular SQLITE_BUSY, SQLITE_LOCKED, SQLITE_FULL, SQLITE_IOERR_*,
// SQLITE_CORRUPT, SQLITE_NOMEM, SQLITE_READONLY_*, SQLITE_CANTOPEN, SQLITE_NOTADB,
// SQLITE_PROTOCOL, SQLITE_INTERRUPT, SQLITE_ABORT, SQLITE_SCHEMA, SQLITE_PERM, SQLITE_AUTH, a
// ROLLBACK that fails. Also, though they can look like a record's:
//   SQLITE_CONSTRAINT_COMMITHOOK, _VTAB, _PINNED: raised by a commit hook, a virtual table or
//   the engine itself, not by the row's values.
//   SQLITE_RANGE, SQLITE_MISUSE, SQLITE_ERROR: a parameter index out of range, a misused
//   handle, a missing table -- the statement or the schema is wrong, for every record alike.
//   (sqlite3_bind_* returns SQLITE_RANGE for a parameter *index*, which no value can change:
//   blaming records for it would dead-letter the whole stream.)
// An unknown code is the world's: a healthy record wrongly blamed under dead_letter<N> is
// skipped for good, while a stop wrongly blamed on the world only delays the stream.

/// True when a failure with this extended result code is the record's (see above).
[[nodiscard]] constexpr bool is_record_failure(int extended_code) noexcept {
  switch (extended_code & 0xff) {
    case SQLITE_CONSTRAINT:
      switch (extended_code) {
        case SQLITE_CONSTRAINT_COMMITHOOK:
        case SQLITE_CONSTRAINT_VTAB:
#ifdef SQLITE_CONSTRAINT_PINNED
        case SQLITE_CONSTRAINT_PINNED:
#endif
          return false;
        default:
          return true;
      }
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
      return true;
    default:
      return false;
  }
}

/// The SQLite result code a failure carries. Every error this adapter throws for a failed
/// SQLite call derives from it, beside its std::exception base; `blame()` says whether it is
/// the record's failure or the world's (adapters/classified.hpp).
class result_code : public adapters::classified_failure {
 public:
  using code_type = int;
  static constexpr std::string_view prefix = "commit_order::sqlite: ";
  [[nodiscard]] static constexpr bool is_record_failure(int code) noexcept {
    return sqlite::is_record_failure(code);
  }

  /// The extended result code (SQLITE_IOERR_FSYNC, SQLITE_CONSTRAINT_CHECK, ...).
  [[nodiscard]] int code() const noexcept { return code_; }
  /// The primary result code: the extended code's low byte (SQLITE_IOERR, SQLITE_CONSTRAINT).
  [[nodiscard]] int primary_code() const noexcept { return code_ & 0xff; }

 protected:
  result_code(int code, adapters::fault blame) noexcept : classified_failure(blame), code_(code) {}
  /// Blamed as the code classifies (an error of one's own that carries a SQLite code).
  explicit result_code(int code) noexcept
      : result_code(code,
                    is_record_failure(code) ? adapters::fault::record : adapters::fault::world) {}

 private:
  int code_;
};

/// A SQLite call failed for a reason that is not the record's (see above): the pipeline rolls
/// the unit back and propagates it with the position unmoved.
class infrastructure_error : public adapters::world_failure<result_code> {
 public:
  /// `code`: the extended result code; `what`: the message, after the adapter's prefix.
  using world_failure::world_failure;
};

/// The row a record makes was refused for its values (see above): the record's failure, which
/// the pipeline's error handling (stop, retry<N>, dead_letter<N>) acts on.
class record_error final : public adapters::record_failure<result_code> {
 public:
  using record_failure::record_failure;
};

/// ROLLBACK failed and the transaction is still open: nothing more can be written through this
/// sink (it would land in a transaction that never commits). Destroy and reopen it; closing the
/// connection discards the transaction.
class rollback_error final : public commit_order::rollback_failed, public result_code {
 public:
  rollback_error(int code, std::string_view why)
      : commit_order::rollback_failed(detail::concat(prefix, why))
      , result_code(code, adapters::fault::world) {}
};

namespace detail {

/// Throws the classified error for a failure with extended result code `code`. Cold and out of
/// line: a message is only ever built here, after a call has failed, never on the path of a
/// call that succeeds.
[[noreturn, gnu::cold, gnu::noinline]] inline void raise(int code, const std::string& what) {
  adapters::detail::raise_classified<record_error, infrastructure_error>(code, what);
}

/// Throws the classified error for a failed call on `db` (nullptr: a failed open).
[[noreturn, gnu::cold, gnu::noinline]] inline void fail(sqlite3* db, int code,
                                                        std::string_view doing,
                                                        std::string_view sql = {}) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  raise(code,
        sql.empty() ? concat(doing, ": ", message) : concat(doing, " '", sql, "': ", message));
}

inline void check(sqlite3* db, int rc, std::string_view doing, std::string_view sql = {}) {
  if (rc != SQLITE_OK) [[unlikely]]
    fail(db, rc, doing, sql);
}

template <class>
inline constexpr bool always_false = false;

}  // namespace detail

// ---- durability: journal_mode x synchronous --------------------------------------------------
//
// What survives a power cut depends on the two pragmas together (SQLite's documentation of
// PRAGMA synchronous and journal_mode, and its pager):
//   WAL + FULL/EXTRA      the WAL is fsync'ed at every commit (and its directory when created):
//                         Synced.
//   WAL + NORMAL          the WAL is synced only at checkpoints: "a transaction committed in WAL
//                         mode with synchronous=NORMAL might roll back following a power loss".
//                         Never corrupt, so Buffered.
//   DELETE + EXTRA        the directory is fsync'ed after the journal is unlinked: Synced.
//   DELETE + FULL         the unlink is not synced: a journal that reappears after a power cut
//                         is hot and rolls the acknowledged commit back. Buffered.
//   TRUNCATE/PERSIST + EXTRA   Synced (EXTRA syncs everything FULL does, and more).
//   TRUNCATE/PERSIST + FULL    the truncation / zeroed header is synced by SQLite's pager, but
//                         its documentation promises durability only at EXTRA: Buffered.
//   rollback journal + NORMAL  not offered: "a power failure at just the wrong time could
//                         corrupt the database", which no capability describes.
//   synchronous OFF, journal_mode MEMORY or OFF: not offered (no durable journal: a crash in a
//                         transaction can leave half of it, so Transactional would be a lie).
// docs/adapters.md has this table; a test checks it against the types.

/// The journal: a rollback journal finished in one of three ways, or a write-ahead log.
enum class journal_mode { rollback_delete, rollback_truncate, rollback_persist, wal };
/// PRAGMA synchronous, at the levels offered.
enum class synchronous { normal, full, extra };

/// What `PRAGMA journal_mode` says for `j`.
[[nodiscard]] constexpr std::string_view pragma_value(journal_mode j) noexcept {
  switch (j) {
    case journal_mode::rollback_delete:
      return "delete";
    case journal_mode::rollback_truncate:
      return "truncate";
    case journal_mode::rollback_persist:
      return "persist";
    case journal_mode::wal:
      return "wal";
  }
  return "";
}
/// The name `PRAGMA synchronous = <name>` takes for `s`.
[[nodiscard]] constexpr std::string_view pragma_value(synchronous s) noexcept {
  switch (s) {
    case synchronous::normal:
      return "NORMAL";
    case synchronous::full:
      return "FULL";
    case synchronous::extra:
      return "EXTRA";
  }
  return "";
}
/// The number `PRAGMA synchronous` answers with for `s`.
[[nodiscard]] constexpr int pragma_number(synchronous s) noexcept {
  return s == synchronous::normal ? 1 : s == synchronous::full ? 2 : 3;
}

/// False for the combinations not offered: a power cut could corrupt the database.
[[nodiscard]] constexpr bool offered(journal_mode j, synchronous s) noexcept {
  return j == journal_mode::wal || s != synchronous::normal;
}
/// True for the combinations whose acknowledged commits survive a power cut.
[[nodiscard]] constexpr bool power_safe(journal_mode j, synchronous s) noexcept {
  return j == journal_mode::wal ? s != synchronous::normal : s == synchronous::extra;
}

namespace detail {
template <journal_mode J, synchronous S>
struct durability_pragmas {
  static_assert(part_rules::require<part_rules::sqlite_unsafe_journal, offered(J, S)>());
  static constexpr journal_mode journal = J;
  static constexpr synchronous sync = S;
  /// What survives: Synced only where a power cut keeps every acknowledged commit.
  using durability = std::conditional_t<power_safe(J, S), Synced, Buffered>;
};
}  // namespace detail

// The durability modes: a sink's or store's last template parameter. Named types, not aliases,
// so a diagnostic prints `wal_full`.

/// WAL + synchronous=FULL: every commit fsyncs the WAL. Synced. The default.
struct wal_full final : detail::durability_pragmas<journal_mode::wal, synchronous::full> {};
/// WAL + synchronous=EXTRA: as wal_full. Synced.
struct wal_extra final : detail::durability_pragmas<journal_mode::wal, synchronous::extra> {};
/// WAL + synchronous=NORMAL: the WAL is synced at checkpoints only; the last commits may roll
/// back after a power cut. Buffered.
struct wal_normal final : detail::durability_pragmas<journal_mode::wal, synchronous::normal> {};
/// DELETE journal + synchronous=EXTRA: the journal's unlink is synced. Synced.
struct delete_extra final
    : detail::durability_pragmas<journal_mode::rollback_delete, synchronous::extra> {};
/// DELETE journal + synchronous=FULL (SQLite's own default): the unlink is not synced, so the
/// last commit may roll back after a power cut. Buffered.
struct delete_full final
    : detail::durability_pragmas<journal_mode::rollback_delete, synchronous::full> {};
/// TRUNCATE journal + synchronous=EXTRA. Synced.
struct truncate_extra final
    : detail::durability_pragmas<journal_mode::rollback_truncate, synchronous::extra> {};
/// TRUNCATE journal + synchronous=FULL: durable in SQLite's pager, not by its documentation.
/// Buffered.
struct truncate_full final
    : detail::durability_pragmas<journal_mode::rollback_truncate, synchronous::full> {};
/// PERSIST journal + synchronous=EXTRA. Synced.
struct persist_extra final
    : detail::durability_pragmas<journal_mode::rollback_persist, synchronous::extra> {};
/// PERSIST journal + synchronous=FULL: durable in SQLite's pager, not by its documentation.
/// Buffered.
struct persist_full final
    : detail::durability_pragmas<journal_mode::rollback_persist, synchronous::full> {};

namespace detail {
// A concept of its own so that the conjunction below stays readable under clang-format 14.
template <class M>
concept names_durability_pragmas = requires {
  { M::journal } -> std::convertible_to<journal_mode>;
  { M::sync } -> std::convertible_to<synchronous>;
  typename M::durability;
};
}  // namespace detail

/// M is one of the durability modes above (or derives from the same base).
template <class M>
concept durability_mode = detail::names_durability_pragmas<M> &&
    std::derived_from<M, detail::durability_pragmas<M::journal, M::sync>>;

/// The connection's settings did not take: SQLite kept another journal mode (another
/// connection holds the database in WAL, the file system cannot share memory for WAL, ...) or
/// another synchronous level. The type's declared durability would be a lie, so the
/// connection is refused.
class durability_mismatch final : public commit_order::infrastructure_error {
 public:
  durability_mismatch(const std::string& file, journal_mode journal, synchronous sync,
                      std::string_view got_journal, int got_synchronous)
      : commit_order::infrastructure_error(detail::concat(
            "commit_order::sqlite: '", file,
            "' was opened for journal_mode=", pragma_value(journal),
            ", synchronous=", pragma_value(sync), " but runs with journal_mode=", got_journal,
            ", synchronous=", std::to_string(got_synchronous),
            "; what the sink's type declares would not hold -- close the other connections "
            "that hold the database in another journal mode, or choose the durability mode "
            "the database can run"))
      , journal_(journal)
      , sync_(sync)
      , got_journal_(got_journal)
      , got_synchronous_(got_synchronous) {}

  [[nodiscard]] journal_mode wanted_journal() const noexcept { return journal_; }
  [[nodiscard]] synchronous wanted_synchronous() const noexcept { return sync_; }
  /// What `PRAGMA journal_mode` answered ("delete", "wal", ...).
  [[nodiscard]] const std::string& actual_journal() const noexcept { return got_journal_; }
  /// What `PRAGMA synchronous` answered (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA).
  [[nodiscard]] int actual_synchronous() const noexcept { return got_synchronous_; }

 private:
  journal_mode journal_;
  synchronous sync_;
  std::string got_journal_;
  int got_synchronous_;
};

struct connection_options final {
  /// How long a write waits for another connection's lock before failing with SQLITE_BUSY.
  std::chrono::milliseconds busy_timeout{5000};
};

namespace detail {
struct statement_deleter {
  void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};
struct connection_deleter {
  // close_v2: a statement still alive (a moved-from owner) cannot keep the handle open forever.
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
}  // namespace detail

/// A prepared statement, reused: bind every parameter, step until done, reset.
class statement final {
 public:
  statement(sqlite3* db, std::string_view sql) : db_(db), sql_(sql) {
    sqlite3_stmt* raw = nullptr;
    detail::check(db,
                  sqlite3_prepare_v3(db, sql_.c_str(), static_cast<int>(sql_.size()),
                                     SQLITE_PREPARE_PERSISTENT, &raw, nullptr),
                  "prepare", sql_);
    stmt_.reset(raw);
  }

  /// Binds a C++ value to parameter `index` (1-based), with the storage class its type maps
  /// to: integers, enumerations and bool as INTEGER, floating point as REAL, strings as TEXT.
  /// A string is bound without a copy (SQLITE_STATIC): it must live until the statement's next
  /// step() has run. A binding stays after reset(), so a statement reused for a new row must
  /// have every parameter bound again before it steps (every statement of this adapter does),
  /// or it would read a string that no longer exists.
  template <class T>
  void bind(int index, const T& value) {
    int rc = SQLITE_OK;
    if constexpr (std::is_enum_v<T>) {
      bind(index, static_cast<std::underlying_type_t<T>>(value));
      return;
    } else if constexpr (std::is_same_v<T, bool>) {
      rc = sqlite3_bind_int64(stmt_.get(), index, value ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      static_assert(
          part_rules::require<part_rules::sqlite_column_type,
                              (std::is_signed_v<T> || sizeof(T) < sizeof(sqlite3_int64))>());
      rc = sqlite3_bind_int64(stmt_.get(), index, static_cast<sqlite3_int64>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      rc = sqlite3_bind_double(stmt_.get(), index, static_cast<double>(value));
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      const std::string_view text(value);
      rc = sqlite3_bind_text64(stmt_.get(), index, text.data(), text.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
    } else {
      static_assert(part_rules::require<part_rules::sqlite_column_type, detail::always_false<T>>());
    }
    if (rc != SQLITE_OK) [[unlikely]]
      fail_bind(rc, index);
  }

  void bind_null(int index) {
    const int rc = sqlite3_bind_null(stmt_.get(), index);
    if (rc != SQLITE_OK) [[unlikely]]
      fail_bind(rc, index);
  }

  /// Runs one step: true when a row is available, false when the statement is done. On an
  /// error the statement is reset (its bindings stay) and the classified error thrown.
  bool step() {
    const int rc = sqlite3_step(stmt_.get());
    if (rc == SQLITE_ROW)
      return true;
    if (rc == SQLITE_DONE) [[likely]]
      return false;
    fail_step(rc);
  }

  /// Runs one step and returns SQLite's result code instead of throwing (for a caller that
  /// must decide what a failure means, as ROLLBACK's does). The statement is reset.
  [[nodiscard]] int step_code() noexcept {
    const int rc = sqlite3_step(stmt_.get());
    sqlite3_reset(stmt_.get());
    return rc;
  }

  /// Makes the statement reusable. Its bindings stay (see bind()): clearing them for every row
  /// would cost a call per row to protect statements that rebind every parameter anyway.
  void reset() noexcept { sqlite3_reset(stmt_.get()); }
  /// Drops every binding (NULL in each parameter).
  void clear_bindings() noexcept { sqlite3_clear_bindings(stmt_.get()); }

  [[nodiscard]] bool column_is_null(int index) const noexcept {
    return sqlite3_column_type(stmt_.get(), index) == SQLITE_NULL;
  }
  [[nodiscard]] std::int64_t column_int64(int index) const noexcept {
    return sqlite3_column_int64(stmt_.get(), index);
  }
  [[nodiscard]] double column_double(int index) const noexcept {
    return sqlite3_column_double(stmt_.get(), index);
  }
  [[nodiscard]] std::string column_text(int index) const {
    const auto* text = sqlite3_column_text(stmt_.get(), index);
    return text == nullptr
               ? std::string()
               : std::string(reinterpret_cast<const char*>(text),
                             static_cast<std::size_t>(sqlite3_column_bytes(stmt_.get(), index)));
  }

  /// How many times the statement ran to completion or to a row (sqlite3_stmt_status): lets a
  /// test see that one prepared statement served every write.
  [[nodiscard]] int runs() const noexcept {
    return sqlite3_stmt_status(stmt_.get(), SQLITE_STMTSTATUS_RUN, 0);
  }

  [[nodiscard]] const std::string& sql() const noexcept { return sql_; }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void fail_bind(int rc, int index) const {
    detail::fail(db_, rc, detail::concat("bind parameter ", std::to_string(index), " of"), sql_);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void fail_step(int rc) {
    // With extended result codes on, sqlite3_step returns the extended code itself.
    const std::string what = detail::concat("step '", sql_, "': ", sqlite3_errmsg(db_));
    sqlite3_reset(stmt_.get());
    detail::raise(rc, what);
  }

  sqlite3* db_;
  std::string sql_;
  std::unique_ptr<sqlite3_stmt, detail::statement_deleter> stmt_;
};

/// Resets a statement when a scope ends, also when a step threw.
class reset_on_exit final {
 public:
  explicit reset_on_exit(statement& s) noexcept : s_(&s) {}
  reset_on_exit(const reset_on_exit&) = delete;
  reset_on_exit& operator=(const reset_on_exit&) = delete;
  ~reset_on_exit() { s_->reset(); }

 private:
  statement* s_;
};

/// The journal mode and synchronous level a connection runs with, as SQLite reports them.
struct effective_durability final {
  std::string journal;   ///< `PRAGMA journal_mode`: "delete", "truncate", "persist", "wal", ...
  int synchronous = -1;  ///< `PRAGMA synchronous`: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
};

/// One connection to one database file.
class connection final {
 public:
  /// Opens (creating if needed) `file` in durability mode `Mode`, and checks that SQLite runs
  /// it: `durability_mismatch` otherwise. An in-memory or temporary database is refused:
  /// nothing written to it is durable, and the sinks declare durability.
  template <durability_mode Mode>
  static connection open(const std::filesystem::path& file, connection_options options = {}) {
    connection c(file, options);
    c.set_durability(Mode::journal, Mode::sync);
    return c;
  }

  /// Opens `file` for an operator's tool (stream_admin, the migration) without touching its
  /// journal mode: that is a setting of the database file, chosen by the sinks that write it,
  /// and a tool switching it would make their next open fail with durability_mismatch. The
  /// tool's own commits run at synchronous=EXTRA, durable in every journal mode.
  static connection open_keeping_journal(const std::filesystem::path& file,
                                         connection_options options = {}) {
    connection c(file, options);
    c.exec("PRAGMA synchronous = EXTRA");
    return c;
  }

  /// Runs one or more statements that return no rows (schema set-up; not for a hot path:
  /// SQLite compiles the text on every call).
  void exec(const std::string& sql) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &message);
    if (rc != SQLITE_OK) {
      const std::string what =
          detail::concat("'", sql, "': ", message != nullptr ? message : sqlite3_errstr(rc));
      sqlite3_free(message);
      detail::raise(rc, what);
    }
  }

  [[nodiscard]] statement prepare(std::string_view sql) { return statement(db_.get(), sql); }

  /// What SQLite runs now: `PRAGMA journal_mode` and `PRAGMA synchronous`, read back.
  [[nodiscard]] effective_durability durability() {
    effective_durability d;
    statement journal(db_.get(), "PRAGMA journal_mode");
    if (journal.step())
      d.journal = journal.column_text(0);
    statement sync(db_.get(), "PRAGMA synchronous");
    if (sync.step())
      d.synchronous = static_cast<int>(sync.column_int64(0));
    return d;
  }

  /// Rows changed by the last INSERT/UPDATE/DELETE: 0 when an upsert's WHERE kept the row.
  [[nodiscard]] std::int64_t changes() const noexcept { return sqlite3_changes(db_.get()); }
  /// True inside an explicit transaction (also after a failed COMMIT that SQLite kept open).
  [[nodiscard]] bool in_transaction() const noexcept {
    return sqlite3_get_autocommit(db_.get()) == 0;
  }
  [[nodiscard]] sqlite3* get() const noexcept { return db_.get(); }

  /// The main database's file, as SQLite resolved it (absolute); empty for a temporary or
  /// in-memory database.
  [[nodiscard]] std::string file_name() const {
    const char* f = sqlite3_db_filename(db_.get(), "main");
    return f == nullptr ? std::string() : std::string(f);
  }

 private:
  connection(const std::filesystem::path& file, connection_options options) {
    const std::string name = file.string();
    if (name.empty() || name == ":memory:")
      throw std::invalid_argument(
          detail::concat("commit_order::sqlite: a sink needs a database file, not '", name,
                         "': an in-memory or temporary database keeps nothing after the process"));
    sqlite3* raw = nullptr;
    const int rc =
        sqlite3_open_v2(name.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    db_.reset(raw);  // even a failed open allocates a handle that must be closed
    detail::check(raw, rc, detail::concat("open '", name, "'"));
    detail::check(raw, sqlite3_extended_result_codes(raw, 1), "enable extended result codes");
    detail::check(raw, sqlite3_busy_timeout(raw, static_cast<int>(options.busy_timeout.count())),
                  "set busy timeout");
    file_ = name;
  }

  void set_durability(journal_mode journal, synchronous sync) {
    try {
      // SQLite answers with the mode it kept; leaving WAL while another connection holds the
      // database fails with SQLITE_BUSY instead. Either way the read-back below decides.
      statement set(db_.get(), detail::concat("PRAGMA journal_mode = ", pragma_value(journal)));
      set.step();
    } catch (const infrastructure_error& e) {
      if (e.primary_code() != SQLITE_BUSY && e.primary_code() != SQLITE_LOCKED)
        throw;
    }
    exec(detail::concat("PRAGMA synchronous = ", pragma_value(sync)));
    // Read both back: what the type declares must be what runs, whatever SQLite did with the
    // requests (a WAL database another connection holds stays WAL; a file system without
    // shared memory cannot run WAL; a build may pin a level).
    const effective_durability got = durability();
    if (got.journal != pragma_value(journal) || got.synchronous != pragma_number(sync))
      throw durability_mismatch(file_, journal, sync, got.journal, got.synchronous);
  }

  std::unique_ptr<sqlite3, detail::connection_deleter> db_;
  std::string file_;
};

}  // namespace commit_order::sqlite
