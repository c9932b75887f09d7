// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/position_store.hpp — a position store in a PostgreSQL table,
// one position per partition.
//
// For the policies that commit their position apart from the sink (AtMostOnce, AtLeastOnce).
// commit(k, p) is one statement in its own transaction (one round trip), durable on return as
// its durability mode says: Synced under the default `synced`, checked with the server at every
// connect (connection.hpp). It is a second write even when the rows live in the same database
// -- only TransactionalPosition puts the position inside the rows' own transaction.
//
// The rows are those of the sinks (position_table.hpp), written as owner epoch 0: if a fencing
// owner has claimed the partition, the store is fenced too rather than overwrite that owner's
// position. A lost connection is an infrastructure_error; the next call reconnects.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/position_table.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::postgres {

struct store_options final {
  std::string stream = "default";
  std::string topic = "default";
  std::string position_table = "commit_order_positions";
  std::string stream_table = "commit_order_streams";
  /// The schema of the tables (empty: the server's search_path); created if missing.
  std::string schema;
  bool create_tables = true;
  std::chrono::milliseconds lock_timeout{10000};
  std::chrono::seconds connect_timeout{10};
};

template <durability_mode Durability = synced>
class position_store final {
 public:
  using capabilities = commit_order::capabilities<typename Durability::durability>;

  /// Connects and checks that the server gives the durability mode (durability_mismatch
  /// otherwise).
  explicit position_store(std::string conninfo, store_options options = {})
      : db_(connection::open<Durability>(connection_options{
            std::move(conninfo), options.schema, options.create_tables, options.lock_timeout,
            std::chrono::milliseconds{0}, options.connect_timeout}))
      , options_(std::move(options)) {
    detail::position_sql::prepare(db_,
                                  position_location{options_.stream, options_.topic,
                                                    options_.position_table, options_.stream_table},
                                  options_.create_tables);
  }

  position_store(const position_store&) = delete;
  position_store& operator=(const position_store&) = delete;

  /// The position stored for partition `k` (none before its first commit).
  [[nodiscard]] std::optional<position> load(partition_id k) const {
    std::string part;
    detail::append_integer(part, k.value());
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str()};
    db_.ensure();
    const result r = db_.exec_prepared(detail::position_sql::load, 3, values);
    if (r.rows() == 0 || r.is_null(0, 0))
      return std::nullopt;
    return position{r.integer(0, 0)};
  }

  /// Stores `p` for partition `k`; durable on return. Throws `fenced` when a fencing owner has
  /// claimed the partition.
  void commit(partition_id k, position p) {
    std::string part = "{", pos = "{";
    detail::append_integer(part, k.value());
    detail::append_integer(pos, p.value());
    part.push_back('}');
    pos.push_back('}');
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str(),
                            pos.c_str(), "{0}"};
    db_.ensure();
    const result r = db_.exec_prepared(detail::position_sql::store, 5, values);
    if (r.rows() != 1) {
      std::string plain;
      detail::append_integer(plain, k.value());
      const char* key[] = {options_.stream.c_str(), options_.topic.c_str(), plain.c_str()};
      const result owner = db_.exec_prepared(detail::position_sql::load, 3, key);
      throw fenced(epoch{0}, owner.rows() == 0 ? epoch{0} : epoch{owner.integer(0, 1)}, k);
    }
    ++commits_;
  }

  // The same for a single-partition stream: partition 0.
  [[nodiscard]] std::optional<position> load() const { return load(partition_id{0}); }
  void commit(position p) { commit(partition_id{0}, p); }

  /// Commits made through this store.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }
  [[nodiscard]] connection& database() noexcept { return db_; }

 private:
  mutable connection db_;
  store_options options_;
  std::size_t commits_ = 0;
};

}  // namespace commit_order::postgres
