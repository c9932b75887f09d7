// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/transactional_log.hpp — an output topic written in transactions,
// as a model of kafka::transactional_sink.
//
// Part of the testing kit. A log, not a table: every write appends a message at the log's next
// offset at once, inside the open transaction, and nothing is ever taken out again. A commit
// marks the transaction's messages committed and an abort marks them aborted; either appends a
// control marker when the transaction wrote anything, which takes an offset of its own (a
// reader's offsets have gaps). The positions
// of the source's partitions, each with its owner epoch, are staged in the transaction and move
// only with its commit, like a group's offsets sent to a producer transaction.
//
// Two readers see it as Kafka's isolation levels do:
//   read_committed()    the committed messages below the last stable offset (the first message
//                       of a transaction still open): an open transaction holds every
//                       read_committed reader back until it ends, and an aborted one is
//                       skipped;
//   read_uncommitted()  every message, aborted and open ones included.
// The pipeline rolls back the unit a crash interrupts (faults.hpp), as a restarted Kafka owner
// aborts its predecessor's open transaction when it initialises its transactions: the aborted
// attempt stays in the log, and only a read_uncommitted reader is shown it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

/// A message of a transactional_log as a reader is shown it.
template <class Row>
struct log_message final {
  std::int64_t at = 0;  ///< its offset in the log (markers take offsets too)
  Row row;
  partition_id source_partition{};
  offset source_offset{};
};

/// An append-only topic written in transactions that also carry the source's positions.
template <class Row, durability_level Durability = Volatile>
class transactional_log final {
 public:
  using row_type = Row;
  using key_type = no_key;
  using capabilities = commit_order::capabilities<AppendOnly, Transactional, Durability>;

  // ---- the unit ---------------------------------------------------------------------------

  void begin() {
    if (open_)
      throw std::logic_error("memory::transactional_log: begin() inside an open transaction");
    open_ = true;
    first_open_ = entries_.size();
    staged_.clear();
  }

  /// Appends `row` at the log's next offset, in the open transaction.
  void apply(partition_id k, offset source_offset, const Row& row) {
    require_transaction("apply()");
    entries_.push_back(entry{state::open, row, k, source_offset});
  }

  /// Marks the transaction's messages committed, appends its marker and moves the staged
  /// positions and owners.
  void commit() {
    require_transaction("commit()");
    const bool wrote = entries_.size() > first_open_;
    for (std::size_t i = first_open_; i < entries_.size(); ++i)
      entries_[i].status = state::committed;
    if (wrote)
      entries_.push_back(entry{state::committed, std::nullopt, {}, {}});
    for (const slot& s : staged_) {
      slot& target = slot_of(s.partition);
      if (s.stored)
        target.stored = s.stored;
      if (s.owner_staged)
        target.owner = s.owner;
    }
    staged_.clear();
    open_ = false;
    ++commits_;
  }

  /// Marks the transaction's messages aborted (they stay in the log) and drops what it staged.
  void rollback() noexcept {
    if (!open_)
      return;
    const bool wrote = entries_.size() > first_open_;
    for (std::size_t i = first_open_; i < entries_.size(); ++i)
      entries_[i].status = state::aborted;
    try {
      if (wrote)
        entries_.push_back(entry{state::aborted, std::nullopt, {}, {}});
    } catch (...) {
      // Out of memory: the marker's offset is not taken; the messages are aborted all the same.
    }
    staged_.clear();
    open_ = false;
    ++aborts_;
  }

  // ---- positions, per partition, inside the transaction -----------------------------------

  void store_position(partition_id k, position p) {
    require_transaction("store_position()");
    staged_slot(k).stored = p;
  }

  /// Stages `p` only while `e` still owns partition `k`.
  void store_position(partition_id k, position p, epoch e) {
    const epoch now = current_owner(k);
    if (e != now)
      throw fenced(e, now, k);
    store_position(k, p);
  }

  /// The committed position of partition `k` (none before its first commit).
  [[nodiscard]] std::optional<position> load_position(partition_id k = partition_id{0}) const {
    const slot* s = find(k);
    return s == nullptr ? std::nullopt : s->stored;
  }

  /// Raises partition `k`'s owner epoch to `e` (on commit) and returns its committed position,
  /// or throws `fenced` when a newer owner has claimed it.
  std::optional<position> claim(partition_id k, epoch e) {
    require_transaction("claim()");
    const epoch now = current_owner(k);
    if (e < now)
      throw fenced(e, now, k);
    slot& s = staged_slot(k);
    s.owner = e;
    s.owner_staged = true;
    return load_position(k);
  }

  /// Raises partition `k`'s owner epoch by one: the last owner started wins.
  claimed claim_next(partition_id k) {
    require_transaction("claim_next()");
    const epoch e = current_owner(k).next();
    slot& s = staged_slot(k);
    s.owner = e;
    s.owner_staged = true;
    return claimed{e, load_position(k)};
  }

  /// The epoch that owns partition `k` now (committed).
  [[nodiscard]] epoch owner(partition_id k = partition_id{0}) const noexcept {
    const slot* s = find(k);
    return s == nullptr ? epoch{0} : s->owner;
  }

  // ---- the readers ------------------------------------------------------------------------

  /// What a read_committed reader is shown: the committed messages below the last stable
  /// offset, in log order.
  [[nodiscard]] std::vector<log_message<Row>> read_committed() const {
    std::vector<log_message<Row>> out;
    const std::size_t stable = open_ ? first_open_ : entries_.size();
    for (std::size_t i = 0; i < stable; ++i)
      if (entries_[i].row && entries_[i].status == state::committed)
        out.push_back(message_at(i));
    return out;
  }

  /// What a read_uncommitted reader is shown: every message, in log order.
  [[nodiscard]] std::vector<log_message<Row>> read_uncommitted() const {
    std::vector<log_message<Row>> out;
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].row)
        out.push_back(message_at(i));
    return out;
  }

  /// The first offset of the transaction still open, or the log's end: where a read_committed
  /// reader stops.
  [[nodiscard]] std::int64_t last_stable_offset() const noexcept {
    return static_cast<std::int64_t>(open_ ? first_open_ : entries_.size());
  }
  /// The offset the next message or marker takes.
  [[nodiscard]] std::int64_t end_offset() const noexcept {
    return static_cast<std::int64_t>(entries_.size());
  }
  /// Whether a transaction is open.
  [[nodiscard]] bool in_transaction() const noexcept { return open_; }
  /// Transactions committed and aborted so far.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }
  [[nodiscard]] std::size_t aborts() const noexcept { return aborts_; }

 private:
  enum class state { open, committed, aborted };
  struct entry {
    state status;
    std::optional<Row> row;  ///< none: a control marker
    partition_id source_partition;
    offset source_offset;
  };
  struct slot {
    partition_id partition;
    std::optional<position> stored;
    epoch owner{0};
    bool owner_staged = false;
  };

  log_message<Row> message_at(std::size_t i) const {
    const entry& e = entries_[i];
    return log_message<Row>{static_cast<std::int64_t>(i), *e.row, e.source_partition,
                            e.source_offset};
  }
  /// The owner a claim staged in the open transaction, else the committed one.
  [[nodiscard]] epoch current_owner(partition_id k) const noexcept {
    for (const slot& s : staged_)
      if (s.partition == k && s.owner_staged)
        return s.owner;
    return owner(k);
  }
  const slot* find(partition_id k) const noexcept {
    for (const slot& s : slots_)
      if (s.partition == k)
        return &s;
    return nullptr;
  }
  slot& slot_of(partition_id k) {
    for (slot& s : slots_)
      if (s.partition == k)
        return s;
    return slots_.emplace_back(slot{k, std::nullopt, epoch{0}, false});
  }
  slot& staged_slot(partition_id k) {
    for (slot& s : staged_)
      if (s.partition == k)
        return s;
    return staged_.emplace_back(slot{k, std::nullopt, owner(k), false});
  }
  void require_transaction(const char* what) const {
    if (!open_)
      throw std::logic_error(std::string("memory::transactional_log: ") + what +
                             " outside a transaction (a transactional log writes only inside "
                             "one)");
  }

  std::vector<entry> entries_;
  std::size_t first_open_ = 0;
  bool open_ = false;
  std::vector<slot> slots_;
  std::vector<slot> staged_;
  std::size_t commits_ = 0;
  std::size_t aborts_ = 0;
};

}  // namespace commit_order::memory
