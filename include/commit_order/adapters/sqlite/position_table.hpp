// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/position_table.hpp — the rows that hold a stream's positions,
// one per partition, with the epoch of each partition's owner; and the row that holds what
// the stream's owners share (its era and partition count). The schema is in layout.hpp.
//
// Both the transactional sinks (inside their transaction) and the SQLite position store use
// the position rows, with the same fencing: a position is only written while the row's epoch
// is the writer's. Every statement is prepared once. Claiming is one statement that raises the
// epoch or returns nothing; storing is one statement that changes exactly one row or fences.
// A claim is also recorded in the claim table (who, when), in the claim's transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/layout.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::sqlite {

/// What one partition's position row holds.
struct position_row final {
  std::optional<position> stored;
  epoch owner{};
  bool exists = false;  ///< false: there is no row (stored and owner say nothing)
};

namespace detail {

using adapters::detail::claim_refused;
using adapters::detail::failed_write_bound_elsewhere;
using adapters::detail::fingerprint_from_column;
using adapters::detail::fingerprint_to_column;
using adapters::detail::store_read_refused;

// The moment a claim was made, as the claim table records it (UTC, milliseconds).
inline constexpr std::string_view sql_now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/// The position rows of one (stream, topic), with their statements prepared once. `stream` and
/// `topic` are bound once, here: the strings live exactly as long as the statements (members of
/// this object, which cannot move), and nothing clears bindings, so the write path binds only
/// what changes.
class position_table final {
 public:
  /// `bound_to` names the data table whose rows the positions vouch for (a transactional
  /// sink's); empty for a position store's or an operator's rows, which claim nothing.
  position_table(connection& db, const std::string& table, std::string stream, std::string topic,
                 bool create, std::string bound_to = {})
      : db_(&db)
      , stream_(std::move(stream))
      , topic_(std::move(topic))
      , table_(require_identifier(table, "position table name"))
      , data_table_(std::move(bound_to))
      , bound_to_(data_table_.empty() ? std::string() : bound_to_with_source(data_table_, {})) {
    check_positions_layout(db, table_, topic_);
    if (create)
      db.exec(positions_definition(table_));
    add_missing_columns(db, table_, create);
    // The shared protocol's statements (adapters/detail/position_protocol.hpp), which say
    // what each changes and returns.
    load_.emplace(db.prepare(position_statements::load(table_)));
    store_claimed_.emplace(db.prepare(position_statements::store_claimed(table_)));
    store_.emplace(db.prepare(position_statements::store_unclaimed(table_)));
    claim_.emplace(db.prepare(position_statements::claim(table_)));
    claim_next_.emplace(db.prepare(position_statements::claim_next(table_)));
    store_bound_.emplace(db.prepare(position_statements::store_bound(table_)));
    reserve_.emplace(db.prepare(position_statements::reserve(table_)));
    for (statement* s : {&*load_, &*store_, &*store_claimed_, &*store_bound_, &*claim_,
                         &*claim_next_, &*reserve_}) {
      s->bind(1, stream_);
      s->bind(2, topic_);
    }
    bind_binding();
  }

  position_table(const position_table&) = delete;
  position_table& operator=(const position_table&) = delete;

  [[nodiscard]] position_row load(partition_id k) {
    statement& s = *load_;
    reset_on_exit reset(s);
    s.bind(3, k.value());
    if (!s.step())
      return {};
    position_row row;
    row.exists = true;
    if (!s.column_is_null(0))
      row.stored = position{s.column_int64(0)};
    row.owner = epoch{s.column_int64(1)};
    return row;
  }

  /// Writes `p` for partition `k` while its owner is `e`, with the fingerprint of the record
  /// `p` follows (none: the row keeps none); throws `fenced` when another owner holds it or,
  /// for a claimed epoch (above 0), when the row is gone. Epoch 0 (no claim) creates the row.
  /// Changes exactly one row or throws.
  void store(partition_id k, position p, epoch e,
             std::optional<std::uint64_t> fingerprint = std::nullopt) {
    {
      statement& s = e == epoch{0} ? *store_ : *store_claimed_;
      reset_on_exit reset(s);
      s.bind(3, k.value());
      s.bind(4, p.value());
      s.bind(5, e.value());
      if (fingerprint)
        s.bind(6, fingerprint_to_column(*fingerprint));
      else
        s.bind_null(6);
      s.step();
    }
    if (db_->changes() != 1) [[unlikely]]
      throw_fenced(k, e);
  }

  /// A position store's load: partition `k`'s position, refused (position_bound_elsewhere)
  /// when the row is bound to anything but what a bound store vouches for. An unbound row is
  /// adopted (a row written before positions were bound), and bound at the next store_bound.
  /// An unbound store reads any row (it has nothing to compare), and cannot write a bound one.
  [[nodiscard]] std::optional<position> load_bound(partition_id k) {
    if (!bound_to_.empty()) {
      statement& r = *reserve_;
      reset_on_exit reset(r);
      r.bind(3, k.value());
      r.step();
    }
    return load_bound(k, !bound_to_.empty());
  }

  /// A position store's write of `p` for partition `k` as owner `e`: binds the row to what the
  /// store vouches for; throws `fenced` when another owner holds it and
  /// position_bound_elsewhere when the row vouches for something else.
  void store_bound(partition_id k, position p, epoch e,
                   std::optional<std::uint64_t> fingerprint = std::nullopt) {
    {
      statement& s = *store_bound_;
      reset_on_exit reset(s);
      s.bind(3, k.value());
      s.bind(4, p.value());
      s.bind(5, e.value());
      if (fingerprint)
        s.bind(7, fingerprint_to_column(*fingerprint));
      else
        s.bind_null(7);
      s.step();
    }
    if (db_->changes() != 1) [[unlikely]]
      refuse_store_bound(k, e);
  }

 private:
  // Why store_bound changed no row: the row is read only to judge it (loaded_fingerprint()
  // stays the last load's).
  [[noreturn, gnu::cold, gnu::noinline]] void refuse_store_bound(partition_id k, epoch e) {
    std::optional<epoch> owner;
    std::optional<std::string> held;
    {
      statement& s = *load_;
      reset_on_exit reset(s);
      s.bind(3, k.value());
      if (s.step()) {
        owner = epoch{s.column_int64(1)};
        if (!s.column_is_null(2))
          held = s.column_text(2);
      }
    }
    if (failed_write_bound_elsewhere(owner, held, bound_to_, e))
      throw_bound_elsewhere(k, *held);
    throw fenced(e, owner.value_or(epoch{0}), k);
  }

  std::optional<position> load_bound(partition_id k, bool check) {
    statement& s = *load_;
    reset_on_exit reset(s);
    s.bind(3, k.value());
    loaded_fingerprint_.reset();
    if (!s.step())
      return std::nullopt;
    if (check && !s.column_is_null(2)) {
      const std::string held = s.column_text(2);
      if (store_read_refused(held, bound_to_)) [[unlikely]]
        throw_bound_elsewhere(k, held);
    }
    loaded_fingerprint_ = fingerprint_in(s, 3);
    if (s.column_is_null(0))
      return std::nullopt;
    return position{s.column_int64(0)};
  }

 public:
  /// Raises partition `k`'s owner to `e` and returns its position; throws `fenced` when a
  /// newer owner holds it.
  std::optional<position> claim(partition_id k, epoch e) {
    statement& s = *claim_;
    reset_on_exit reset(s);
    s.bind(3, k.value());
    s.bind(4, e.value());
    // RETURNING yields the row only when the INSERT or the UPDATE happened: none means the
    // WHERE kept a newer owner.
    if (!s.step())
      throw_fenced(k, e);
    std::optional<position> stored;
    if (!s.column_is_null(0))
      stored = position{s.column_int64(0)};
    check_binding(k, s, 1);
    claimed_fingerprint_ = fingerprint_in(s, 2);
    while (s.step()) {
    }
    return stored;
  }

  /// Raises partition `k`'s owner epoch by one and returns it with the stored position.
  claimed claim_next(partition_id k) {
    statement& s = *claim_next_;
    reset_on_exit reset(s);
    s.bind(3, k.value());
    claimed c{};
    if (s.step()) {
      c.owner = epoch{s.column_int64(0)};
      if (!s.column_is_null(1))
        c.stored = position{s.column_int64(1)};
      check_binding(k, s, 2);
      claimed_fingerprint_ = fingerprint_in(s, 3);
      while (s.step()) {
      }
    }
    return c;
  }

  /// The fingerprint stored with the position the last claim or claim_next returned (none when
  /// it was stored without one, or there was none).
  [[nodiscard]] std::optional<std::uint64_t> claimed_fingerprint() const noexcept {
    return claimed_fingerprint_;
  }
  /// The same for the position the last load_bound returned.
  [[nodiscard]] std::optional<std::uint64_t> loaded_fingerprint() const noexcept {
    return loaded_fingerprint_;
  }

  [[nodiscard]] const std::string& topic() const noexcept { return topic_; }

  /// Binds a position store's rows to what its positions vouch for: the data table (empty when
  /// the store is not told one) and the source (its identity; empty when it has none). A store
  /// told neither stays unbound, and refuses only rows bound to something.
  /// What is bound already stays: a store made from a sink keeps that sink's table when a
  /// pipeline over a wrapper of the sink names none.
  /// A store bound to nothing that kept the default stream is refused: a second consumer of
  /// the database that kept the defaults too would share its position.
  void bind(std::string_view table, std::string_view identity, std::string_view database = {}) {
    if (!table.empty()) {
      data_table_ = std::string(table);
      // The sink's table in another file than the positions: the binding names that file.
      data_database_ = database == db_->file_name() ? std::string() : std::string(database);
    }
    if (data_table_.empty() && identity.empty()) {
      if (stream_ == default_stream) [[unlikely]]
        throw_unbound_default();
      return;
    }
    bound_to_ = bound_to_with_source(data_table_, identity, data_database_);
    bind_binding();
  }

  /// The stream of a consumer that names none: store_options' and sink_options' default.
  static constexpr std::string_view default_stream = "default";

  /// Binds the claims to the source the positions are read from too (its identity), as well as
  /// to the data table. Outside a claim; a table without a binding (a store's) ignores it.
  void bind_source(std::string_view identity) {
    if (bound_to_.empty() || identity.empty())
      return;
    bound_to_ = bound_to_with_source(data_table_, identity);
    bind_binding();
  }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void throw_unbound_default() const {
    adapters::detail::throw_unbound_default(
        "commit_order::sqlite", "SQLite", table_,
        ", or make the store from the SQLite sink (position_store(sink))");
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_fenced(partition_id k, epoch e) {
    throw fenced(e, load(k).owner, k);
  }

  void bind_binding() {
    // The statements keep a pointer to bound_to_ (bound without a copy): rebound when it changes.
    if (bound_to_.empty()) {
      claim_->bind_null(5);
      claim_next_->bind_null(4);
      store_bound_->bind_null(6);
      reserve_->bind_null(4);
    } else {
      claim_->bind(5, bound_to_);
      claim_next_->bind(4, bound_to_);
      store_bound_->bind(6, bound_to_);
      reserve_->bind(4, bound_to_);
    }
  }

  // The row a claim returned is bound to this table, or the claim is refused. (A row without
  // a binding can only be returned to a claimer without one: a store's or an operator's.)
  void check_binding(partition_id k, statement& s, int column) {
    if (s.column_is_null(column))
      return;
    const std::string held = s.column_text(column);
    if (claim_refused(held, bound_to_)) [[unlikely]]
      throw_bound_elsewhere(k, held);
  }

  [[noreturn, gnu::cold, gnu::noinline]] void throw_bound_elsewhere(partition_id k,
                                                                    const std::string& held) {
    adapters::detail::throw_bound_elsewhere(k, table_, stream_, topic_, held, bound_to_);
  }

  static std::optional<std::uint64_t> fingerprint_in(statement& s, int column) {
    if (s.column_is_null(column))
      return std::nullopt;
    return fingerprint_from_column(s.column_int64(column));
  }

  // Adds the columns a position table written by an earlier version lacks: bound_to (before
  // positions were bound to their table) and fingerprint (before a position kept the
  // fingerprint of the record it follows).
  static void add_missing_columns(connection& db, const std::string& quoted, bool create) {
    add_column(db, quoted, create, "bound_to", "TEXT",
               "it was written before positions were bound to their table");
    add_column(db, quoted, create, "fingerprint", "INTEGER",
               "it was written before positions kept the fingerprint of the record they follow");
    add_column(db, quoted, create, "fingerprint_position", "INTEGER",
               "it was written before positions kept the fingerprint of the record they follow");
  }

  static void add_column(connection& db, const std::string& quoted, bool create,
                         std::string_view column, std::string_view type, std::string_view why) {
    const std::string_view table = unquoted(quoted);
    if (!has_table(db, table) || has_column(db, table, column))
      return;
    const std::string add = concat("ALTER TABLE ", quoted, " ADD COLUMN ", column, " ", type);
    if (!create)
      throw commit_order::error(concat("commit_order::sqlite: the position table '", table,
                                       "' has no column '", column, "' (", why,
                                       ", and create_tables, or store_options::create_table, is "
                                       "off); add it with: ",
                                       add));
    // Two sinks opening at once: the second waits for the first's write lock, then finds the
    // column there.
    db.exec("BEGIN IMMEDIATE");
    try {
      if (!has_column(db, table, column))
        db.exec(add);
      db.exec("COMMIT");
    } catch (...) {
      db.exec("ROLLBACK");
      throw;
    }
  }

  connection* db_;
  std::string stream_;
  std::string topic_;
  std::string table_;
  std::string data_table_;
  std::string data_database_;  ///< the data table's file, when it is not the positions' own
  std::string bound_to_;
  std::optional<statement> load_;
  std::optional<statement> store_;
  std::optional<statement> store_claimed_;
  std::optional<statement> store_bound_;
  std::optional<statement> reserve_;
  std::optional<statement> claim_;
  std::optional<statement> claim_next_;
  std::optional<std::uint64_t> claimed_fingerprint_;
  std::optional<std::uint64_t> loaded_fingerprint_;
};

/// The record of every claim of one (stream, topic): partition, epoch, member, time. Written in
/// the claim's transaction, so a claim rolled back (fenced, a failed check) leaves no record.
class claim_table final {
 public:
  claim_table(connection& db, const std::string& table, std::string stream, std::string topic,
              std::string member, bool create)
      : stream_(std::move(stream))
      , topic_(std::move(topic))
      , member_(std::move(member))
      , table_(require_identifier(table, "claim table name")) {
    if (create)
      db.exec(claims_definition(table_));
    // Claiming again at the epoch one holds (a restart of the same owner) updates its record.
    record_.emplace(db.prepare(
        concat("INSERT INTO ", table_,
               " (stream, topic, \"partition\", owner_epoch, owner_member, claimed_at)"
               " VALUES (?1, ?2, ?3, ?4, ?5, ",
               sql_now,
               ") ON CONFLICT (stream, topic, \"partition\", owner_epoch) DO UPDATE SET"
               " owner_member = excluded.owner_member, claimed_at = excluded.claimed_at")));
    record_->bind(1, stream_);
    record_->bind(2, topic_);
    if (member_.empty())
      record_->bind_null(5);
    else
      record_->bind(5, member_);
  }

  claim_table(const claim_table&) = delete;
  claim_table& operator=(const claim_table&) = delete;

  void record(partition_id k, epoch e) {
    statement& s = *record_;
    reset_on_exit reset(s);
    s.bind(3, k.value());
    s.bind(4, e.value());
    s.step();
  }

 private:
  std::string stream_;
  std::string topic_;
  std::string member_;
  std::string table_;
  std::optional<statement> record_;
};

/// The row of what a stream's owners share: its era and the partition count recorded at the
/// first claim. Not on the write path: read and written when partitions are claimed, and by
/// an operator.
class stream_table final {
 public:
  stream_table(connection& db, const std::string& table, std::string stream, std::string topic,
               bool create)
      : stream_(std::move(stream))
      , topic_(std::move(topic))
      , table_(require_identifier(table, "stream table name")) {
    if (create)
      db.exec(streams_definition(table_));
    read_.emplace(db.prepare(position_statements::read_stream(table_)));
    set_count_.emplace(db.prepare(position_statements::accept_partition_count(table_)));
    record_count_.emplace(db.prepare(position_statements::record_partition_count(table_)));
    bump_.emplace(db.prepare(position_statements::bump_era(table_)));
    for (statement* s : {&*read_, &*set_count_, &*record_count_, &*bump_}) {
      s->bind(1, stream_);
      s->bind(2, topic_);
    }
  }

  stream_table(const stream_table&) = delete;
  stream_table& operator=(const stream_table&) = delete;

  /// The stream's era (0 until an operator bumps it).
  [[nodiscard]] std::int64_t era() {
    statement& s = *read_;
    reset_on_exit reset(s);
    return s.step() ? s.column_int64(0) : 0;
  }

  /// The partition count recorded at the first claim (none before it, or after the operator
  /// told the stream to forget it).
  [[nodiscard]] std::optional<std::size_t> partition_count() {
    statement& s = *read_;
    reset_on_exit reset(s);
    if (!s.step() || s.column_is_null(1))
      return std::nullopt;
    return static_cast<std::size_t>(s.column_int64(1));
  }

  /// Records `n` as the partition count (none: forget it, the next claim records what it sees).
  void set_partition_count(std::optional<std::size_t> n) {
    statement& s = *set_count_;
    reset_on_exit reset(s);
    if (n)
      s.bind(3, static_cast<std::int64_t>(*n));
    else
      s.bind_null(3);
    s.step();
  }

  /// A claim's record of the partition count `n` it sees: recorded when none is, or whatever is
  /// when `version_guarded` (its guard does not depend on partitions); throws
  /// partition_count_changed when another count stays recorded.
  void record_partition_count(std::size_t n, bool version_guarded) {
    statement& s = *record_count_;
    reset_on_exit reset(s);
    s.bind(3, static_cast<std::int64_t>(n));
    s.bind(4, std::int64_t{version_guarded ? 1 : 0});
    std::size_t recorded = n;
    if (s.step()) {
      recorded = static_cast<std::size_t>(s.column_int64(0));
      while (s.step()) {
      }
    }
    adapters::detail::check_recorded_count(recorded, n);
  }

  /// Raises the era by one and returns it.
  std::int64_t bump_era() {
    statement& s = *bump_;
    reset_on_exit reset(s);
    std::int64_t era = 0;
    if (s.step()) {
      era = s.column_int64(0);
      while (s.step()) {
      }
    }
    return era;
  }

 private:
  std::string stream_;
  std::string topic_;
  std::string table_;
  std::optional<statement> read_;
  std::optional<statement> set_count_;
  std::optional<statement> record_count_;
  std::optional<statement> bump_;
};

}  // namespace detail

}  // namespace commit_order::sqlite
