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
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/position_table.hpp"
#include "commit_order/adapters/postgres/table.hpp"
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
    detail::position_sql::prepare_store(
        db_, position_location{options_.stream, options_.topic, options_.position_table,
                               options_.stream_table});
  }

  position_store(const position_store&) = delete;
  position_store& operator=(const position_store&) = delete;

  /// The position stored for partition `k` (none before its first commit). Throws
  /// position_bound_elsewhere when the row vouches for another table or source than a bound
  /// store (see bind_to).
  [[nodiscard]] std::optional<position> load(partition_id k = partition_id{0}) {
    if (!bound_to_.empty())
      reserve(k);
    loaded_fingerprint_.reset();
    const result r = load_row(k);
    if (r.rows() == 0)
      return std::nullopt;
    if (!bound_to_.empty())
      check_binding(k, r);  // an unbound store has nothing to compare (it cannot write it)
    if (!r.is_null(0, 3))
      loaded_fingerprint_ = adapters::detail::fingerprint_from_column(r.integer(0, 3));
    if (r.is_null(0, 0))
      return std::nullopt;
    return position{r.integer(0, 0)};
  }

  /// The fingerprint stored with the position the last load returned (none when it was stored
  /// without one, or the row's position was moved since by a writer that keeps none).
  [[nodiscard]] std::optional<std::uint64_t> loaded_fingerprint() const noexcept {
    return loaded_fingerprint_;
  }

  /// Stores `p` for partition `k`; durable on return. Throws `fenced` when a fencing owner has
  /// claimed the partition, and position_bound_elsewhere when the row vouches for another table
  /// or source (the row is not changed).
  void commit(partition_id k, position p) { store(k, p, std::nullopt); }

  /// The same, with the fingerprint of the record `p` follows (fingerprinting_position_store):
  /// kept in the row and returned with the position by the next load, so that a source rebuilt
  /// under the position (a topic deleted and recreated under its name) is caught.
  void commit(partition_id k, position p, std::uint64_t fingerprint) { store(k, p, fingerprint); }

  /// Binds the positions to what they vouch for: the sink's data table and the source's
  /// identity (the pipeline calls it before recovery, with what its sink and source name). A
  /// row stored for another table or source is then refused at load and commit, so two
  /// consumers that kept the default stream never share a position. A store told neither is
  /// unbound: it adopts an unbound row and refuses a bound one.
  /// What is bound already stays where the pipeline names less (a wrapper of the sink that
  /// names no table).
  /// A store bound to nothing that kept the default stream is refused (std::invalid_argument):
  /// a second consumer of the database that kept the defaults too would share its position.
  void bind_to(const std::string& table, const std::string& identity,
               const std::string& database = {}) {
    if (!table.empty()) {
      data_table_ = table;
      // The sink's table in another database than the positions: the binding names it.
      db_.ensure();
      data_database_ = database == db_.database_name() ? std::string() : database;
    }
    if (data_table_.empty() && identity.empty()) {
      if (options_.stream == store_options{}.stream) [[unlikely]]
        throw_unbound_default();
      return;
    }
    bound_to_ = detail::bound_to_with_source(data_table_, identity, data_database_);
  }

  /// Commits made through this store.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }
  [[nodiscard]] connection& database() noexcept { return db_; }

 private:
  // One partition's row, with a fingerprint or none; durable on return.
  void store(partition_id k, position p, std::optional<std::uint64_t> fingerprint) {
    std::string part, pos, print;
    detail::append_integer(part, k.value());
    detail::append_integer(pos, p.value());
    if (fingerprint)
      detail::append_integer(print, adapters::detail::fingerprint_to_column(*fingerprint));
    // A PostgreSQL position store claims nothing: it writes at epoch 0.
    const char* values[] = {options_.stream.c_str(),
                            options_.topic.c_str(),
                            part.c_str(),
                            pos.c_str(),
                            "0",
                            bound_to_.empty() ? nullptr : bound_to_.c_str(),
                            fingerprint ? print.c_str() : nullptr};
    db_.ensure();
    const result r = db_.exec_prepared(detail::position_sql::store_bound, 7, values);
    if (r.affected() != 1) {
      const result row = load_row(k);
      const std::optional<epoch> owner =
          row.rows() == 0 ? std::nullopt : std::optional{epoch{row.integer(0, 1)}};
      std::optional<std::string_view> held;
      if (row.rows() != 0 && !row.is_null(0, 2))
        held = row.text(0, 2);
      if (adapters::detail::failed_write_bound_elsewhere(owner, held, bound_to_, epoch{0}))
        throw_bound_elsewhere(k, std::string(*held));
      throw fenced(epoch{0}, owner.value_or(epoch{0}), k);
    }
    ++commits_;
  }

  void reserve(partition_id k) {
    std::string part;
    detail::append_integer(part, k.value());
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str(),
                            bound_to_.c_str()};
    db_.ensure();
    (void)db_.exec_prepared(detail::position_sql::reserve, 4, values);
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_unbound_default() const {
    adapters::detail::throw_unbound_default("commit_order::postgres", "PostgreSQL",
                                            options_.position_table, "");
  }

  result load_row(partition_id k) {
    std::string part;
    detail::append_integer(part, k.value());
    const char* values[] = {options_.stream.c_str(), options_.topic.c_str(), part.c_str()};
    db_.ensure();
    return db_.exec_prepared(detail::position_sql::load, 3, values);
  }

  // The row's binding (column 2) is this store's, or none.
  void check_binding(partition_id k, const result& row) const {
    if (row.is_null(0, 2))
      return;
    const std::string held(row.text(0, 2));
    if (adapters::detail::store_read_refused(held, bound_to_)) [[unlikely]]
      throw_bound_elsewhere(k, held);
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_bound_elsewhere(partition_id k,
                                                                    const std::string& held) const {
    detail::throw_bound_elsewhere(k, options_.schema, options_.position_table, options_.stream,
                                  options_.topic, held, bound_to_);
  }

  connection db_;
  store_options options_;
  std::string data_table_;     ///< the sink's table the positions vouch for (bind_to)
  std::string data_database_;  ///< its database, when it is not the positions' own
  std::string bound_to_;       ///< what the positions vouch for (bind_to); empty: unbound
  std::optional<std::uint64_t> loaded_fingerprint_;  ///< of the last load's row
  std::size_t commits_ = 0;
};

}  // namespace commit_order::postgres
