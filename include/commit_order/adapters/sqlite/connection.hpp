// commit_order/adapters/sqlite/connection.hpp — a SQLite connection and its prepared
// statements, as RAII types that throw instead of returning codes.
//
// The durability of every write made through a connection is fixed when it is opened: the
// `synchronous` mode is a compile-time parameter of the sinks and stores, so what they declare
// (Synced, Buffered) is what the pragma does.
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

#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"

namespace commit_order::sqlite {

/// A SQLite call failed; `code()` is the extended result code.
class error final : public commit_order::error {
 public:
  error(int code, const std::string& what)
      : commit_order::error("commit_order::sqlite: " + what), code_(code) {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

// ---- durability: the synchronous pragma ----------------------------------------------------

/// synchronous=FULL: a commit returns after its journal (or WAL) is fsync'ed: it survives a
/// power loss. The default.
struct synchronous_full final {
  using durability = Synced;
  static constexpr std::string_view pragma = "FULL";
};
/// synchronous=NORMAL: fewer syncs; a commit survives the process but may roll back after a
/// power loss (WAL), so it is declared Buffered.
struct synchronous_normal final {
  using durability = Buffered;
  static constexpr std::string_view pragma = "NORMAL";
};

template <class S>
concept synchronous_mode =
    std::is_same_v<S, synchronous_full> || std::is_same_v<S, synchronous_normal>;

/// The journal keeps transactions atomic either way; WAL lets readers run beside the writer.
/// (OFF and MEMORY are not offered: without a durable journal a crash mid-transaction can leave
/// half of it, which would make the Transactional capability a lie.)
enum class journal_mode { rollback, wal };

struct connection_options final {
  journal_mode journal = journal_mode::rollback;
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

inline void check(sqlite3* db, int rc, std::string_view doing) {
  if (rc != SQLITE_OK)
    throw error(
        db != nullptr ? sqlite3_extended_errcode(db) : rc,
        std::string(doing) + ": " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

template <class>
inline constexpr bool always_false = false;
}  // namespace detail

/// A prepared statement, reused: bind, step until done, reset.
class statement final {
 public:
  statement(sqlite3* db, std::string_view sql) : db_(db), sql_(sql) {
    sqlite3_stmt* raw = nullptr;
    detail::check(db,
                  sqlite3_prepare_v3(db, sql_.c_str(), static_cast<int>(sql_.size()),
                                     SQLITE_PREPARE_PERSISTENT, &raw, nullptr),
                  "prepare '" + sql_ + "'");
    stmt_.reset(raw);
  }

  /// Binds a C++ value to parameter `index` (1-based), with the storage class its type maps
  /// to: integers, enumerations and bool as INTEGER, floating point as REAL, strings as TEXT.
  /// A string is bound without a copy: it must live until the statement is reset.
  template <class T>
  void bind(int index, const T& value) {
    int rc = SQLITE_OK;
    if constexpr (std::is_enum_v<T>) {
      bind(index, static_cast<std::underlying_type_t<T>>(value));
      return;
    } else if constexpr (std::is_same_v<T, bool>) {
      rc = sqlite3_bind_int64(stmt_.get(), index, value ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      static_assert(std::is_signed_v<T> || sizeof(T) < sizeof(sqlite3_int64),
                    "commit_order::sqlite: SQLite integers are signed 64-bit; a uint64_t above "
                    "INT64_MAX would not round-trip -- use std::int64_t");
      rc = sqlite3_bind_int64(stmt_.get(), index, static_cast<sqlite3_int64>(value));
    } else if constexpr (std::is_floating_point_v<T>) {
      rc = sqlite3_bind_double(stmt_.get(), index, static_cast<double>(value));
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      const std::string_view text(value);
      rc = sqlite3_bind_text64(stmt_.get(), index, text.data(), text.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
    } else {
      static_assert(detail::always_false<T>,
                    "commit_order::sqlite: no SQLite storage class for this member type -- use "
                    "an integer, enum, bool, floating point or string member");
    }
    detail::check(db_, rc, "bind parameter " + std::to_string(index) + " of '" + sql_ + "'");
  }

  void bind_null(int index) {
    detail::check(db_, sqlite3_bind_null(stmt_.get(), index), "bind NULL in '" + sql_ + "'");
  }

  /// Runs one step: true when a row is available, false when the statement is done. On an
  /// error the statement is reset (its bindings stay) and `error` thrown.
  bool step() {
    const int rc = sqlite3_step(stmt_.get());
    if (rc == SQLITE_ROW)
      return true;
    if (rc == SQLITE_DONE)
      return false;
    const int code = sqlite3_extended_errcode(db_);
    const std::string what = std::string("step '") + sql_ + "': " + sqlite3_errmsg(db_);
    sqlite3_reset(stmt_.get());
    throw error(code, what);
  }

  /// Makes the statement reusable and drops its bindings (so no string outlives its binding).
  void reset() noexcept {
    sqlite3_reset(stmt_.get());
    sqlite3_clear_bindings(stmt_.get());
  }

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

/// One connection to one database file.
class connection final {
 public:
  /// Opens (creating if needed) `file` with the given synchronous mode and journal. An
  /// in-memory or temporary database is refused: nothing written to it is durable, and the
  /// sinks declare durability.
  template <synchronous_mode Sync>
  static connection open(const std::filesystem::path& file, connection_options options = {}) {
    return connection(file, Sync::pragma, options);
  }

  connection(const std::filesystem::path& file, std::string_view synchronous,
             connection_options options) {
    const std::string name = file.string();
    if (name.empty() || name == ":memory:")
      throw std::invalid_argument(
          "commit_order::sqlite: a sink needs a database file, not '" + name +
          "': an in-memory or temporary database keeps nothing after the process");
    sqlite3* raw = nullptr;
    const int rc =
        sqlite3_open_v2(name.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    db_.reset(raw);  // even a failed open allocates a handle that must be closed
    detail::check(raw, rc, "open '" + name + "'");
    detail::check(raw, sqlite3_extended_result_codes(raw, 1), "enable extended result codes");
    detail::check(raw, sqlite3_busy_timeout(raw, static_cast<int>(options.busy_timeout.count())),
                  "set busy timeout");
    const std::string_view journal = options.journal == journal_mode::wal ? "wal" : "delete";
    {
      statement mode(raw, "PRAGMA journal_mode = " + std::string(journal));
      const std::string got = mode.step() ? mode.column_text(0) : std::string();
      // SQLite answers with the mode it kept; anything else means the request was ignored.
      if (got != journal)
        throw error(SQLITE_ERROR, "journal_mode " + std::string(journal) + " refused for '" + name +
                                      "' (it stays '" + got + "')");
    }
    exec("PRAGMA synchronous = " + std::string(synchronous));
  }

  /// Runs one or more statements that return no rows.
  void exec(const std::string& sql) {
    char* message = nullptr;
    const int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &message);
    if (rc != SQLITE_OK) {
      const std::string what = "'" + sql + "': " + (message != nullptr ? message : "");
      sqlite3_free(message);
      throw error(sqlite3_extended_errcode(db_.get()), what);
    }
  }

  [[nodiscard]] statement prepare(std::string_view sql) { return statement(db_.get(), sql); }

  /// Rows changed by the last INSERT/UPDATE/DELETE: 0 when an upsert's WHERE kept the row.
  [[nodiscard]] std::int64_t changes() const noexcept { return sqlite3_changes(db_.get()); }
  /// True inside an explicit transaction (also after a failed COMMIT that SQLite kept open).
  [[nodiscard]] bool in_transaction() const noexcept {
    return sqlite3_get_autocommit(db_.get()) == 0;
  }
  [[nodiscard]] sqlite3* get() const noexcept { return db_.get(); }

 private:
  std::unique_ptr<sqlite3, detail::connection_deleter> db_;
};

}  // namespace commit_order::sqlite
