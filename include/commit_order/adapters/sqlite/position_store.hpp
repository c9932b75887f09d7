// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/position_store.hpp — a position store in a SQLite table.
//
// For the policies that commit their position apart from the sink (AtMostOnce, AtLeastOnce).
// commit(p) is one autocommit transaction on the position row (see position_table.hpp),
// durable on return as its durability mode says: `Synced` under the default wal_full (see
// connection.hpp for every journal x synchronous combination). It is a second
// write even when the rows live in the same database file — only TransactionalPosition puts
// the position inside the rows' own transaction.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/position_table.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::sqlite {

struct store_options final {
  std::string stream = "default";
  std::string position_table = "commit_order_positions";
  /// How long a commit waits for another connection's lock before failing with SQLITE_BUSY (an
  /// infrastructure_error).
  std::chrono::milliseconds busy_timeout{5000};
  bool create_table = true;
};

template <durability_mode Durability = wal_full>
class position_store final {
 public:
  using capabilities = commit_order::capabilities<typename Durability::durability>;

  /// Throws durability_mismatch when SQLite does not run the durability mode.
  explicit position_store(const std::filesystem::path& file, store_options options = {})
      : db_(connection::open<Durability>(file, {options.busy_timeout})) {
    positions_.emplace(db_, options.position_table, options.stream, options.create_table);
  }

  position_store(const position_store&) = delete;
  position_store& operator=(const position_store&) = delete;

  [[nodiscard]] std::optional<position> load() const { return positions_->load().stored; }

  /// Durable on return (as the durability mode says); allocates nothing. Written as owner epoch 0:
  /// if a fencing owner has claimed this stream, the store is fenced too rather than overwriting
  /// that owner's position.
  void commit(position p) { positions_->store(p, epoch{0}); }

  /// The connection (for tests, and for pragmas that do not touch durability).
  [[nodiscard]] connection& database() noexcept { return db_; }

 private:
  connection db_;
  mutable std::optional<detail::position_table> positions_;
};

}  // namespace commit_order::sqlite
