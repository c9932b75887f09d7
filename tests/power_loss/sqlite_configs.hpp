// The journal x synchronous combinations the SQLite adapter offers, and its default, for the
// power_loss tests that run each of them. A configuration names the sink and store types (whose
// declared durability the tests compare with what survives) and the options that go with them.
#pragma once

#include <commit_order/adapters/sqlite.hpp>
#include <string>
#include <utility>

namespace power_loss {

namespace sq = commit_order::sqlite;

template <sq::journal_mode Journal, class Sync>
struct sqlite_config final {
  template <class Table, class Mode>
  using sink = sq::table_sink<Table, Mode, Sync>;
  using store = sq::position_store<Sync>;

  static std::string name() {
    return std::string(Journal == sq::journal_mode::wal ? "WAL" : "DELETE") +
           " journal, synchronous=" + std::string(Sync::pragma);
  }
  static sq::sink_options sink_options(std::string stream) {
    sq::sink_options o;
    o.stream = std::move(stream);
    o.journal = Journal;
    return o;
  }
  static sq::store_options store_options(std::string stream) {
    sq::store_options o;
    o.stream = std::move(stream);
    o.journal = Journal;
    return o;
  }
};

using delete_full = sqlite_config<sq::journal_mode::rollback, sq::synchronous_full>;
using wal_full = sqlite_config<sq::journal_mode::wal, sq::synchronous_full>;
using delete_normal = sqlite_config<sq::journal_mode::rollback, sq::synchronous_normal>;
using wal_normal = sqlite_config<sq::journal_mode::wal, sq::synchronous_normal>;

/// What a user gets who configures nothing: the default template arguments and options.
struct default_config final {
  template <class Table, class Mode>
  using sink = sq::table_sink<Table, Mode>;
  using store = sq::position_store<>;

  static std::string name() { return "default configuration"; }
  static sq::sink_options sink_options(std::string stream) {
    sq::sink_options o;
    o.stream = std::move(stream);
    return o;
  }
  static sq::store_options store_options(std::string stream) {
    sq::store_options o;
    o.stream = std::move(stream);
    return o;
  }
};

/// The first row of a one-value PRAGMA (journal_mode, synchronous), as text.
inline std::string pragma(sq::connection& db, const std::string& name) {
  auto q = db.prepare("PRAGMA " + name);
  return q.step() ? q.column_text(0) : std::string();
}

/// `PRAGMA integrity_check` of an open database: "ok", or what SQLite found.
inline std::string integrity(sq::connection& db) {
  auto check = db.prepare("PRAGMA integrity_check");
  std::string result;
  while (check.step())
    result += (result.empty() ? "" : "; ") + check.column_text(0);
  return result;
}

}  // namespace power_loss
