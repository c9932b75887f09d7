// SPDX-License-Identifier: BSL-1.0
// The SQLite durability modes (journal x synchronous) the adapter offers, and its default, for
// the power_loss tests that run each of them. A configuration names the sink and store types
// (whose declared durability the tests compare with what survives) and how to open the
// database the same way.
#pragma once

#include <commit_order/adapters/sqlite.hpp>
#include <filesystem>
#include <string>
#include <utility>

namespace power_loss {

namespace sq = commit_order::sqlite;

/// One durability mode, or (Mode = void) whatever a user gets who names none.
template <class Mode>
struct sqlite_config final {
  template <class Table, class WriteMode>
  using sink = sq::table_sink<Table, WriteMode, Mode>;
  using store = sq::position_store<Mode>;

  static std::string name() {
    return std::string(sq::pragma_value(Mode::journal)) +
           " journal, synchronous=" + std::string(sq::pragma_value(Mode::sync));
  }
  static sq::connection open(const std::filesystem::path& file) {
    return sq::connection::open<Mode>(file);
  }
};

namespace detail {
template <class Store>
struct mode_of;
template <class Mode>
struct mode_of<sq::position_store<Mode>> {
  using type = Mode;
};
}  // namespace detail

/// The mode the adapter picks when none is named, read from its default template argument.
using default_mode = typename detail::mode_of<sq::position_store<>>::type;

template <>
struct sqlite_config<void> final {
  template <class Table, class WriteMode>
  using sink = sq::table_sink<Table, WriteMode>;
  using store = sq::position_store<>;

  static std::string name() {
    return "default configuration (" + sqlite_config<default_mode>::name() + ")";
  }
  static sq::connection open(const std::filesystem::path& file) {
    return sq::connection::open<default_mode>(file);
  }
};

using default_config = sqlite_config<void>;

inline sq::sink_options sink_options(std::string stream) {
  sq::sink_options o;
  o.stream = std::move(stream);
  return o;
}
inline sq::store_options store_options(std::string stream) {
  sq::store_options o;
  o.stream = std::move(stream);
  return o;
}

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
