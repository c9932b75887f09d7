// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/admin.hpp — what an operator does to a stream's tables without
// a pipeline: read who owns which partition, bump the era, accept a new partition count, and
// migrate a database written before partitions.
//
//   sqlite::stream_admin admin("orders.sqlite", {.stream = "flattener", .topic = "orders"});
//   admin.bump_era();                 // the consumer group was deleted and recreated
//   admin.accept_partition_count(8);  // the topic was repartitioned, its old partitions drained
//
//   sqlite::migrate_to_partitions<orders_flat>("orders.sqlite");  // once, consumers stopped
//
// A tool opens the database without changing its journal mode (connection::open_keeping_journal);
// every change it makes is one transaction, and waits for the sinks' transactions (busy
// timeout) rather than interleaving with them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/layout.hpp"
#include "commit_order/adapters/sqlite/position_table.hpp"
#include "commit_order/adapters/sqlite/table.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::sqlite {

struct admin_options final {
  /// The stream and topic the positions belong to, as the sinks name them (sink_options).
  std::string stream = "default";
  std::string topic{};
  std::string position_table = std::string(detail::default_position_table);
  std::string stream_table = std::string(detail::default_stream_table);
  std::string claim_table = std::string(detail::default_claim_table);
  std::chrono::milliseconds busy_timeout{5000};
};

/// One partition's position row, as an operator reads it, with the record of the claim that
/// made its owner.
struct partition_state final {
  partition_id partition;
  std::optional<position> stored;  ///< none until the first commit
  epoch owner;                     ///< the owner epoch the row holds
  std::string owner_member;        ///< who claimed it at that epoch, empty if unnamed or unknown
  std::string claimed_at;          ///< when, UTC (ISO 8601), empty if unknown
};

/// One claim, as the claim table records it.
struct claim_record final {
  partition_id partition;
  epoch owner;
  std::string owner_member;  ///< empty if unnamed
  std::string claimed_at;    ///< UTC, ISO 8601
};

/// The operator's handle on one (stream, topic): the functions the sink offers as
/// stream_registry, usable while no pipeline runs (or while pipelines run: each change is one
/// transaction, and claims read the era and the count inside theirs).
class stream_admin final {
 public:
  /// Opens `file` keeping its journal mode; creates the stream and position tables if they do
  /// not exist yet (an era can be set before the first consumer runs). Throws outdated_layout
  /// for a position table written before partitions.
  explicit stream_admin(const std::filesystem::path& file, admin_options options = {})
      : db_(connection::open_keeping_journal(file, {options.busy_timeout})) {
    positions_.emplace(db_, options.position_table, options.stream, options.topic, true);
    streams_.emplace(db_, options.stream_table, options.stream, options.topic, true);
    const std::string positions =
        detail::require_identifier(options.position_table, "position table name");
    const std::string claims = detail::require_identifier(options.claim_table, "claim table name");
    db_.exec(detail::claims_definition(claims));
    list_.emplace(db_.prepare(detail::concat(
        "SELECT p.\"partition\", p.position, p.owner_epoch, c.owner_member, c.claimed_at FROM ",
        positions, " AS p LEFT JOIN ", claims,
        " AS c ON c.stream = p.stream AND c.topic = p.topic AND c.\"partition\" ="
        " p.\"partition\" AND c.owner_epoch = p.owner_epoch"
        " WHERE p.stream = ?1 AND p.topic = ?2 ORDER BY p.\"partition\"")));
    history_.emplace(db_.prepare(
        detail::concat("SELECT \"partition\", owner_epoch, owner_member, claimed_at FROM ", claims,
                       " WHERE stream = ?1 AND topic = ?2 ORDER BY \"partition\", owner_epoch")));
    stream_ = std::move(options.stream);
    topic_ = std::move(options.topic);
  }

  stream_admin(const stream_admin&) = delete;
  stream_admin& operator=(const stream_admin&) = delete;

  /// The stream's era (0 until bumped).
  [[nodiscard]] std::int64_t era() { return streams_->era(); }

  /// Raises the era by one and returns it. The way out — and the only one — when a consumer
  /// group was deleted and recreated: its generations restarted, so every epoch it claims
  /// (era << 32 | generation) is below the stored ones and is fenced. After the bump, the new
  /// group's epochs rise above every epoch of the old one. Never lower a stored epoch instead:
  /// a zombie of the old group would be let back in.
  std::int64_t bump_era() { return streams_->bump_era(); }

  /// The partition count recorded at the first claim (none before it).
  [[nodiscard]] std::optional<std::size_t> partition_count() { return streams_->partition_count(); }

  /// Acknowledges a repartitioned stream — after the producers were stopped and every old
  /// partition drained, so no key has unconsumed records in its old partition: the next claim
  /// records the count it sees.
  void accept_partition_count() { streams_->set_partition_count(std::nullopt); }
  /// The same, naming the new count: a claim that sees another one still fails.
  void accept_partition_count(std::size_t n) { streams_->set_partition_count(n); }

  /// Every partition's position row of the stream, ascending: who owns what, at which epoch.
  [[nodiscard]] std::vector<partition_state> partitions() {
    statement& s = *list_;
    reset_on_exit reset(s);
    s.bind(1, stream_);
    s.bind(2, topic_);
    std::vector<partition_state> out;
    while (s.step()) {
      partition_state p;
      p.partition = partition_id{static_cast<partition_id::value_type>(s.column_int64(0))};
      if (!s.column_is_null(1))
        p.stored = position{s.column_int64(1)};
      p.owner = epoch{s.column_int64(2)};
      p.owner_member = s.column_text(3);
      p.claimed_at = s.column_text(4);
      out.push_back(std::move(p));
    }
    return out;
  }

  /// Every claim of the stream's partitions, by partition and epoch: who owned what, from when.
  [[nodiscard]] std::vector<claim_record> claims() {
    statement& s = *history_;
    reset_on_exit reset(s);
    s.bind(1, stream_);
    s.bind(2, topic_);
    std::vector<claim_record> out;
    while (s.step()) {
      claim_record c;
      c.partition = partition_id{static_cast<partition_id::value_type>(s.column_int64(0))};
      c.owner = epoch{s.column_int64(1)};
      c.owner_member = s.column_text(2);
      c.claimed_at = s.column_text(3);
      out.push_back(std::move(c));
    }
    return out;
  }

  [[nodiscard]] connection& database() noexcept { return db_; }

 private:
  connection db_;
  std::optional<detail::position_table> positions_;  // created and checked for the old layout
  std::optional<detail::stream_table> streams_;
  std::optional<statement> list_;
  std::optional<statement> history_;
  std::string stream_;
  std::string topic_;
};

struct migration_options final {
  /// The topic the migrated position rows get (what the sinks' sink_options::topic will say).
  std::string topic{};
  /// The partition every migrated row and position came from: the adapter before partitions
  /// fed a table and a position row from one partition; 0 unless it was another one.
  partition_id partition{0};
  std::string position_table = std::string(detail::default_position_table);
  std::chrono::milliseconds busy_timeout{5000};
};

/// What a migration changed.
struct migration_result final {
  bool positions = false;  ///< the position table was keyed by stream alone and was rebuilt
  std::size_t tables = 0;  ///< data tables that gained their partition column and index
};

/// Migrates a database written by the SQLite adapter before partitions, in one transaction:
/// the position table (if keyed by stream alone) becomes one keyed by (stream, topic,
/// partition) with every row's position and owner epoch kept; each data table of `Tables` that
/// lacks its partition column gets it (every existing row: `options.partition`) and the
/// (partition, offset) index. What is already migrated is left alone, so running it twice is
/// harmless. Stop every consumer of the database first: a process of the old adapter would
/// fail on the new schema in the middle of its work.
template <describes_table... Tables>
migration_result migrate_to_partitions(const std::filesystem::path& file,
                                       migration_options options = {}) {
  connection db = connection::open_keeping_journal(file, {options.busy_timeout});
  const std::string positions =
      detail::require_identifier(options.position_table, "position table name");
  migration_result done;
  db.exec("BEGIN IMMEDIATE");
  try {
    if (detail::has_table(db, detail::unquoted(positions)) &&
        !detail::has_column(db, detail::unquoted(positions), "partition")) {
      db.exec(detail::positions_migration_sql(positions, options.topic, options.partition));
      done.positions = true;
    }
    const auto migrate = [&]<class D>() {
      if (detail::has_table(db, D::name) && !detail::has_column(db, D::name, D::partition_column)) {
        db.exec(detail::table_migration_sql<D>(options.partition));
        ++done.tables;
      }
    };
    (migrate.template operator()<Tables>(), ...);
    db.exec("COMMIT");
  } catch (...) {
    // Leaves the database as it was; if even ROLLBACK fails, closing the connection (on the
    // way out) discards the transaction.
    try {
      if (db.in_transaction())
        db.exec("ROLLBACK");
    } catch (...) {
    }
    throw;
  }
  return done;
}

}  // namespace commit_order::sqlite
