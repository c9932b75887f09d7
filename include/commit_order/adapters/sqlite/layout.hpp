// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/layout.hpp — the schema the SQLite adapter writes, how it
// recognises a database written before partitions, and what the migration runs.
//
// Positions, one row per (stream, topic, partition) — read and written by every unit of work,
// so it holds nothing else:
//
//   CREATE TABLE commit_order_positions (
//     stream TEXT NOT NULL,          -- the consumer the positions belong to (a group, a job)
//     topic TEXT NOT NULL,           -- the source it reads ('' for a source without topics)
//     "partition" INTEGER NOT NULL,
//     position INTEGER,              -- the next offset to read; NULL until the first commit
//     owner_epoch INTEGER NOT NULL DEFAULT 0,
//     PRIMARY KEY (stream, topic, "partition"))
//
// Who claimed which partition at which epoch, and when — one row per claim, written in the
// claim's transaction (a claim rolled back leaves none), never by a unit of work:
//
//   CREATE TABLE commit_order_claims (
//     stream TEXT NOT NULL, topic TEXT NOT NULL, "partition" INTEGER NOT NULL,
//     owner_epoch INTEGER NOT NULL,
//     owner_member TEXT,             -- sink_options::member (a host and pid, a member id)
//     claimed_at TEXT NOT NULL,      -- UTC, ISO 8601
//     PRIMARY KEY (stream, topic, "partition", owner_epoch))
//
// What the owners of a stream share, one row per (stream, topic):
//
//   CREATE TABLE commit_order_streams (
//     stream TEXT NOT NULL, topic TEXT NOT NULL,
//     era INTEGER NOT NULL DEFAULT 0,  -- raised only by an operator (stream_admin::bump_era)
//     partition_count INTEGER,         -- recorded at the first claim of a partitioned source
//     PRIMARY KEY (stream, topic))
//
// A data table carries `source_partition` and `source_offset` beside its columns, with an index
// on (source_partition, source_offset) for the applied watermark of one partition (unless its
// layout declares `partition_index = false`: see table.hpp for what the index costs).
//
// The adapter before partitions wrote positions keyed by `stream` alone and data tables without
// `source_partition`. Such a file is refused with `outdated_layout`, which names the migration:
// `migrate_to_partitions<Tables...>(file)` (admin.hpp) runs it in one transaction. Nothing is
// migrated implicitly: a process of the old adapter still writing to the file would fail on
// the new schema in the middle of its work, so the operator stops them first.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "commit_order/adapters/detail/position_protocol.hpp"
#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/table.hpp"
#include "commit_order/adapters/sqlite/text.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::sqlite {

/// The database was written by the SQLite adapter before partitions: a position table keyed by
/// stream alone, or a data table whose rows do not carry their partition. Reading it with
/// today's statements would fail in the middle of a run, or worse, start a stream over; so the
/// sink (or store) refuses it at construction and names the migration. Not an
/// infrastructure_error: retrying does not help, migrating does.
class outdated_layout final : public commit_order::error {
 public:
  outdated_layout(std::string table, std::string missing_column, std::string migration)
      : commit_order::error(detail::concat(
            "commit_order::sqlite: table '", table, "' has no column '", missing_column,
            "': it was written by the SQLite adapter before partitions. Stop every consumer of "
            "the database, then migrate it once with commit_order::sqlite::"
            "migrate_to_partitions<your table layouts...>(file) (docs/adapters.md, "
            "\"A database written before partitions\"), which runs: ",
            migration))
      , table_(std::move(table))
      , missing_column_(std::move(missing_column))
      , migration_(std::move(migration)) {}

  /// The table that has the old layout.
  [[nodiscard]] const std::string& table() const noexcept { return table_; }
  /// The column today's layout needs and the table lacks.
  [[nodiscard]] const std::string& missing_column() const noexcept { return missing_column_; }
  /// The SQL the migration runs for this table (in one transaction, with the others).
  [[nodiscard]] const std::string& migration() const noexcept { return migration_; }

 private:
  std::string table_;
  std::string missing_column_;
  std::string migration_;
};

namespace detail {

inline constexpr std::string_view default_position_table = "commit_order_positions";
inline constexpr std::string_view default_stream_table = "commit_order_streams";
inline constexpr std::string_view default_claim_table = "commit_order_claims";

inline std::string require_identifier(const std::string& name, std::string_view what) {
  if (!is_identifier(name))
    throw std::invalid_argument(concat("commit_order::sqlite: the ", what, " '", name,
                                       "' is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)"));
  return quote_identifier(name);
}

/// `text` as a string literal (for a message or a table-valued pragma).
inline std::string sql_literal(std::string_view text) {
  return adapters::detail::quote_literal(text);
}

/// `name` quoted by require_identifier (a plain identifier in double quotes), unquoted.
inline std::string_view unquoted(std::string_view quoted) {
  return quoted.substr(1, quoted.size() - 2);
}

/// How SQLite spells the shared position protocol (adapters/detail/position_protocol.hpp).
struct dialect final {
  static constexpr char parameter = '?';
  static constexpr std::string_view int64 = "INTEGER";
  static constexpr std::string_view same = "IS";
  static constexpr std::string_view boolean = "";  // no boolean type: 0 or 1
};
using position_statements = adapters::detail::position_statements<dialect>;

inline std::string positions_definition(std::string_view quoted_table) {
  return position_statements::create_positions(quoted_table);
}

inline std::string claims_definition(std::string_view quoted_table) {
  return concat("CREATE TABLE IF NOT EXISTS ", quoted_table,
                " (stream TEXT NOT NULL, topic TEXT NOT NULL, \"partition\" INTEGER NOT NULL,"
                " owner_epoch INTEGER NOT NULL, owner_member TEXT, claimed_at TEXT NOT NULL,"
                " PRIMARY KEY (stream, topic, \"partition\", owner_epoch))");
}

inline std::string streams_definition(std::string_view quoted_table) {
  return position_statements::create_streams(quoted_table);
}

template <class D>
std::string partition_index_name() {
  return concat(D::name, "_by_", D::partition_column, "_", D::offset_column);
}

/// The index the applied watermark of one partition reads (MAX(offset) WHERE partition = k is
/// one seek instead of a scan of the table).
template <class D>
std::string partition_index_definition() {
  return concat("CREATE INDEX IF NOT EXISTS ", quote_identifier(partition_index_name<D>()), " ON ",
                quote_identifier(D::name), " (", quote_identifier(D::partition_column), ", ",
                quote_identifier(D::offset_column), ")");
}

/// True when `table` exists in the main database.
inline bool has_table(connection& db, std::string_view table) {
  statement q = db.prepare("SELECT count(*) FROM pragma_table_info(?1)");
  q.bind(1, table);
  return q.step() && q.column_int64(0) > 0;
}

/// True when `table` has a column `column` (names compare as SQLite compares them: no case).
inline bool has_column(connection& db, std::string_view table, std::string_view column) {
  statement q =
      db.prepare("SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2 COLLATE NOCASE");
  q.bind(1, table);
  q.bind(2, column);
  return q.step() && q.column_int64(0) > 0;
}

/// The migration of a data table written before partitions: its rows came from one partition.
template <class D>
std::string table_migration_sql(partition_id partition) {
  std::string sql = concat("ALTER TABLE ", quote_identifier(D::name), " ADD COLUMN ",
                           quote_identifier(D::partition_column), " INTEGER NOT NULL DEFAULT ",
                           std::to_string(partition.value()), ";");
  if constexpr (D::partition_index)
    sql.append(concat(" ", partition_index_definition<D>(), ";"));
  return sql;
}

/// The name the old position table is moved to while its rows are copied.
inline std::string old_positions_name(std::string_view quoted_table) {
  return quote_identifier(concat(unquoted(quoted_table), "_before_partitions"));
}

/// The migration of a position table keyed by stream alone: every row becomes partition
/// `partition` of topic `topic` of its stream, with its position and owner epoch.
inline std::string positions_migration_sql(std::string_view quoted_table, std::string_view topic,
                                           partition_id partition) {
  const std::string old = old_positions_name(quoted_table);
  return concat("ALTER TABLE ", quoted_table, " RENAME TO ", old, "; ",
                positions_definition(quoted_table), "; INSERT INTO ", quoted_table,
                " (stream, topic, \"partition\", position, owner_epoch) SELECT stream, ",
                sql_literal(topic), ", ", std::to_string(partition.value()),
                ", position, owner_epoch FROM ", old, "; DROP TABLE ", old, ";");
}

/// Throws outdated_layout when the position table exists with the layout before partitions.
inline void check_positions_layout(connection& db, std::string_view quoted_table,
                                   std::string_view topic) {
  const std::string_view table = unquoted(quoted_table);
  if (has_table(db, table) && !has_column(db, table, "partition"))
    throw outdated_layout(std::string(table), "partition",
                          positions_migration_sql(quoted_table, topic, partition_id{0}));
}

/// Throws outdated_layout when D's table exists without its partition column.
template <class D>
void check_table_layout(connection& db) {
  if (has_table(db, D::name) && !has_column(db, D::name, D::partition_column))
    throw outdated_layout(std::string(D::name), std::string(D::partition_column),
                          table_migration_sql<D>(partition_id{0}));
}

}  // namespace detail

}  // namespace commit_order::sqlite
