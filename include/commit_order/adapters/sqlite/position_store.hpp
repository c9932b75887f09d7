// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/position_store.hpp — a position store in a SQLite table.
//
// For the policies that commit their positions apart from the sink (AtMostOnce, AtLeastOnce).
// It keeps one position per partition in the position table (see layout.hpp), keyed by
// (stream, topic, partition); `load()` and `commit(p)` are partition 0's. commit(k, p) is one
// autocommit transaction on partition k's row, durable on return as its durability mode says:
// `Synced` under the default wal_full (see connection.hpp for every journal x synchronous
// combination). It is a second write even when the rows live in the same database file — only
// TransactionalPosition puts the positions inside the rows' own transaction.
//
// A store opens its own connection to its file, or shares a SQLite sink's: when the positions
// live in the sink's database, a second connection costs more than the second write. SQLite
// discards a connection's page cache whenever another connection has written to the database
// since its last transaction, so two connections taking turns re-read their pages at every
// batch (about a fifth of the instructions per record at batch 1, bench/sqlite_bench.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/layout.hpp"
#include "commit_order/adapters/sqlite/position_table.hpp"
#include "commit_order/adapters/sqlite/sink.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::sqlite {

struct store_options final {
  /// The consumer the positions belong to; see sink_options.
  std::string stream = "default";
  /// The source it reads (a topic; empty for a source without topics).
  std::string topic{};
  std::string position_table = std::string(detail::default_position_table);
  /// How long a commit waits for another connection's lock before failing with SQLITE_BUSY (an
  /// infrastructure_error).
  std::chrono::milliseconds busy_timeout{5000};
  bool create_table = true;
};

template <durability_mode Durability = wal_full>
class position_store final {
 public:
  using capabilities = commit_order::capabilities<typename Durability::durability>;

  /// Throws durability_mismatch when SQLite does not run the durability mode, and
  /// outdated_layout when the position table was written by the adapter before partitions.
  explicit position_store(const std::filesystem::path& file, store_options options = {})
      : own_(connection::open<Durability>(file, {options.busy_timeout})), db_(&*own_) {
    positions_.emplace(*db_, options.position_table, std::move(options.stream),
                       std::move(options.topic), options.create_table);
  }

  /// Shares `sink`'s connection (and so its database file and durability mode; the options'
  /// busy_timeout is the sink's). The sink must outlive the store. commit() refuses to run
  /// inside the sink's open transaction: the position would commit with the rows, when the
  /// rows commit, instead of on its own and now.
  template <describes_table D, write_mode M>
  explicit position_store(table_sink<D, M, Durability>& sink, store_options options = {})
      : db_(&sink.database()) {
    positions_.emplace(*db_, options.position_table, std::move(options.stream),
                       std::move(options.topic), options.create_table);
    positions_->bind(sink.bound_table(), {});
  }

  position_store(const position_store&) = delete;
  position_store& operator=(const position_store&) = delete;

  /// Partition `k`'s position. Throws position_bound_elsewhere when the row vouches for
  /// another table or source than a bound store (see bind_to).
  [[nodiscard]] std::optional<position> load(partition_id k = partition_id{0}) const {
    return positions_->load_bound(k);
  }

  /// Durable on return (as the durability mode says); allocates nothing. Written as owner
  /// epoch 0: if a fencing owner has claimed the partition, the store is fenced too rather
  /// than overwriting that owner's position; a row bound to another table or source is
  /// position_bound_elsewhere, and is not changed.
  void commit(partition_id k, position p) {
    if (!own_ && db_->in_transaction()) [[unlikely]]
      throw_inside_transaction();
    positions_->store_bound(k, p, epoch{0});
  }

  /// The same, with the fingerprint of the record `p` follows (fingerprinting_position_store):
  /// kept in the row and returned with the position by the next load, so that a source rebuilt
  /// under the position (a topic deleted and recreated under its name) is caught.
  void commit(partition_id k, position p, std::uint64_t fingerprint) {
    if (!own_ && db_->in_transaction()) [[unlikely]]
      throw_inside_transaction();
    positions_->store_bound(k, p, epoch{0}, fingerprint);
  }

  /// The fingerprint stored with the position the last load returned (none when it was stored
  /// without one, or the row's position was moved since by a writer that keeps none).
  [[nodiscard]] std::optional<std::uint64_t> loaded_fingerprint() const noexcept {
    return positions_->loaded_fingerprint();
  }

  /// Binds the positions to what they vouch for: the sink's data table and the source's
  /// identity (the pipeline calls it before recovery, with what its sink and source name; a
  /// store made from a sink is bound to that sink's table from the start). A row stored for
  /// another table or source is then refused at load and commit, so two consumers that kept
  /// the default stream never share a position.
  void bind_to(const std::string& table, const std::string& identity) {
    positions_->bind(table, identity);
  }
  /// The same, with the sink's database file: a table in another file than the store's is
  /// bound as that file's (two files' tables of one name never share a position).
  void bind_to(const std::string& table, const std::string& identity, const std::string& database) {
    positions_->bind(table, identity, database);
  }

  /// The connection (for tests, and for pragmas that do not touch durability).
  [[nodiscard]] connection& database() noexcept { return *db_; }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] static void throw_inside_transaction() {
    throw std::logic_error(
        "commit_order::sqlite: position_store::commit() inside the open transaction of the sink "
        "whose connection it shares: the position would commit with that transaction, not on its "
        "own -- commit or roll back the sink's transaction first");
  }

  std::optional<connection> own_;
  connection* db_;
  mutable std::optional<detail::position_table> positions_;
};

}  // namespace commit_order::sqlite
