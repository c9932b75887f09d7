// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/position_table.hpp — the row that holds a stream's position
// and the epoch of its owner.
//
//   CREATE TABLE <positions> (stream TEXT PRIMARY KEY, position INTEGER, owner_epoch INTEGER)
//
// One row per stream partition. `position` is the next offset to read (NULL until the first
// commit); `owner_epoch` is the generation of the consumer that owns the stream. Both the
// transactional sinks (inside their transaction) and the SQLite position store use it, with
// the same fencing: a position is only written while the row's epoch is the writer's.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/table.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::sqlite {

/// What the position row holds.
struct position_row final {
  std::optional<position> stored;
  epoch owner{};
};

namespace detail {

inline std::string require_identifier(const std::string& name, std::string_view what) {
  if (!is_identifier(name))
    throw std::invalid_argument(concat("commit_order::sqlite: the ", what, " '", name,
                                       "' is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)"));
  return quote_identifier(name);
}

/// The position row of one stream, with its statements prepared once.
class position_table final {
 public:
  position_table(connection& db, const std::string& table, std::string stream, bool create)
      : stream_(std::move(stream)), table_(require_identifier(table, "position table name")) {
    if (create)
      db.exec(concat("CREATE TABLE IF NOT EXISTS ", table_,
                     " (stream TEXT PRIMARY KEY NOT NULL, position INTEGER,"
                     " owner_epoch INTEGER NOT NULL DEFAULT 0)"));
    load_.emplace(
        db.prepare(concat("SELECT position, owner_epoch FROM ", table_, " WHERE stream = ?1")));
    // The WHERE makes the write conditional on ownership: a stale owner's upsert changes no
    // row, which is how it learns it was fenced, inside the transaction it must roll back.
    store_.emplace(
        db.prepare(concat("INSERT INTO ", table_,
                          " (stream, position, owner_epoch) VALUES (?1, ?2, ?3)"
                          " ON CONFLICT (stream) DO UPDATE SET position = excluded.position"
                          " WHERE ",
                          table_, ".owner_epoch = excluded.owner_epoch")));
    claim_.emplace(db.prepare(concat("INSERT INTO ", table_,
                                     " (stream, position, owner_epoch) VALUES (?1, NULL, ?2)"
                                     " ON CONFLICT (stream) DO UPDATE SET owner_epoch ="
                                     " excluded.owner_epoch WHERE ",
                                     table_, ".owner_epoch <= excluded.owner_epoch")));
    db_ = &db;
  }

  [[nodiscard]] position_row load() {
    statement& s = *load_;
    reset_on_exit reset(s);
    s.bind(1, stream_);
    if (!s.step())
      return {};
    position_row row;
    if (!s.column_is_null(0))
      row.stored = position{s.column_int64(0)};
    row.owner = epoch{s.column_int64(1)};
    return row;
  }

  /// Writes `p` while the row's owner is `e` (or creates the row owned by `e`); throws
  /// `fenced` when another owner holds it.
  void store(position p, epoch e) {
    {
      statement& s = *store_;
      reset_on_exit reset(s);
      s.bind(1, stream_);
      s.bind(2, p.value());
      s.bind(3, e.value());
      s.step();
    }
    if (db_->changes() == 0)
      throw fenced(e, load().owner);
  }

  /// Raises the row's owner to `e` and returns its position; throws `fenced` when a newer
  /// owner holds it.
  std::optional<position> claim(epoch e) {
    {
      statement& s = *claim_;
      reset_on_exit reset(s);
      s.bind(1, stream_);
      s.bind(2, e.value());
      s.step();
    }
    const bool raised = db_->changes() != 0;
    const position_row row = load();
    if (!raised)
      throw fenced(e, row.owner);
    return row.stored;
  }

 private:
  std::string stream_;
  std::string table_;
  connection* db_ = nullptr;
  std::optional<statement> load_;
  std::optional<statement> store_;
  std::optional<statement> claim_;
};

}  // namespace detail

}  // namespace commit_order::sqlite
