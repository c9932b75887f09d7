// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/table.hpp — an in-memory table with declared capabilities.
//
// Part of the testing kit. Its behaviour follows the capabilities it is given, so one type
// models every sink the rules talk about:
//   Idempotent     rows are upserted by the event-derived key (otherwise: plain append);
//   OffsetGuarded  an upsert wins only if its source offset is newer than the row's;
//   Transactional  begin/commit/rollback, with the position stored in the same transaction;
//   a durability tag and MaxTransactionRows<N> are declared, not simulated;
//   the position row carries an owner epoch, so two pipelines on one table fence each other;
//   a run-time transaction limit (set_max_transaction_rows) stands for a server setting.
// Like a real table it outlives the pipeline, which is what crash tests rely on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

/// A row as the table keeps it: the value and the source offset it came from.
template <class Row>
struct stored_row final {
  Row row;
  offset source_offset;
};

template <class Row, class Key = no_key, class Caps = capabilities<Volatile>>
class table final {
  static constexpr bool keyed = contains_capability_v<Caps, Idempotent>;
  static constexpr bool guarded = contains_capability_v<Caps, OffsetGuarded>;
  static constexpr bool transactional = contains_capability_v<Caps, Transactional>;
  static_assert(!keyed || !std::is_same_v<Key, no_key>,
                "memory::table: an Idempotent table needs a key, e.g. key<&Row::id>");
  static_assert(!guarded || keyed, "memory::table: OffsetGuarded is a condition on a keyed upsert");

 public:
  using row_type = Row;
  using key_type = Key;
  /// What the table was given; Volatile unless it names a durability of its own.
  using capabilities = with_default_durability_t<Caps, Volatile>;
  // A key that cannot be called with the row (a UUID generator) leaves a placeholder here, so
  // the table can still be named and judged: rule R8 reports the key, not this line.
  using key_value =
      typename std::conditional_t<keyed && std::is_invocable_v<const Key&, const Row&>,
                                  std::invoke_result<const Key&, const Row&>,
                                  std::type_identity<int>>::type;

  /// Applies one row. Durable on return, or at commit() when a transaction is open.
  write_outcome apply(offset source_offset, const Row& row) {
    if constexpr (keyed) {
      auto k = Key{}(row);
      auto it = keyed_.find(k);
      if constexpr (guarded) {
        if (it != keyed_.end() && !(it->second.source_offset < source_offset)) {
          return write_outcome::absorbed;
        }
      }
      if (in_tx_) {
        undo_.push_back(
            undo_entry{k, it == keyed_.end() ? std::nullopt : std::optional{it->second}});
      }
      if (it == keyed_.end()) {
        keyed_.emplace(std::move(k), stored_row<Row>{row, source_offset});
      } else {
        it->second = stored_row<Row>{row, source_offset};
      }
    } else {
      appended_.push_back(stored_row<Row>{row, source_offset});
    }
    if (!watermark_ || *watermark_ < source_offset)
      watermark_ = source_offset;
    return write_outcome::applied;
  }

  // ---- transactions (Transactional tables only) --------------------------------------------

  void begin() requires transactional {
    if (in_tx_)
      throw std::logic_error("memory::table: begin() inside an open transaction");
    in_tx_ = true;
    undo_.clear();
    appended_at_begin_ = appended_.size();
    watermark_at_begin_ = watermark_;
    staged_position_.reset();
    staged_owner_.reset();
  }

  void store_position(position p) requires transactional {
    if (!in_tx_)
      throw std::logic_error("memory::table: store_position() outside a transaction");
    staged_position_ = p;
  }

  /// Fencing: raises the owner epoch to `e` (on commit) and returns the stored position, or
  /// throws `fenced` when a newer owner has claimed the position.
  std::optional<position> claim(epoch e) requires transactional {
    if (!in_tx_)
      throw std::logic_error("memory::table: claim() outside a transaction");
    if (e < owner_)
      throw fenced(e, owner_);
    staged_owner_ = e;
    return position_;
  }

  /// Stages `p` only while `e` still owns the position.
  void store_position(position p, epoch e) requires transactional {
    const epoch current = staged_owner_.value_or(owner_);
    if (e != current)
      throw fenced(e, current);
    store_position(p);
  }

  void commit() requires transactional {
    if (!in_tx_)
      throw std::logic_error("memory::table: commit() without begin()");
    if (staged_position_)
      position_ = staged_position_;
    if (staged_owner_)
      owner_ = *staged_owner_;
    staged_owner_.reset();
    in_tx_ = false;
    undo_.clear();
    ++commits_;
  }

  void rollback() noexcept requires transactional {
    if (!in_tx_)
      return;
    if constexpr (keyed) {
      for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
        if (it->previous) {
          keyed_.insert_or_assign(it->k, *it->previous);
        } else {
          keyed_.erase(it->k);
        }
      }
    }
    appended_.resize(appended_at_begin_);
    watermark_ = watermark_at_begin_;
    in_tx_ = false;
    undo_.clear();
    staged_position_.reset();
    staged_owner_.reset();
  }

  [[nodiscard]] std::optional<position> load_position() const requires transactional {
    return position_;
  }

  /// The epoch that currently owns the position row.
  [[nodiscard]] epoch owner() const noexcept { return owner_; }

  /// A run-time transaction limit, as a server setting would impose (0: none).
  [[nodiscard]] std::size_t max_transaction_rows() const noexcept { return runtime_max_rows_; }
  void set_max_transaction_rows(std::size_t n) noexcept { runtime_max_rows_ = n; }

  // ---- what a test inspects ----------------------------------------------------------------

  /// Number of rows in the table.
  [[nodiscard]] std::size_t size() const noexcept {
    if constexpr (keyed) {
      return keyed_.size();
    } else {
      return appended_.size();
    }
  }

  /// The row stored under `k` (Idempotent tables).
  [[nodiscard]] const stored_row<Row>* find(const key_value& k) const requires keyed {
    auto it = keyed_.find(k);
    return it == keyed_.end() ? nullptr : &it->second;
  }

  /// Every row, in key order (Idempotent) or in append order.
  template <class F>
  void for_each(F&& f) const {
    if constexpr (keyed) {
      for (const auto& [k, r] : keyed_)
        f(r);
    } else {
      for (const auto& r : appended_)
        f(r);
    }
  }

  /// The sink's applied watermark: the highest source offset present in the table.
  [[nodiscard]] std::optional<offset> applied_watermark() const noexcept { return watermark_; }

  /// Committed transactions so far.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }

 private:
  struct undo_entry {
    key_value k;
    std::optional<stored_row<Row>> previous;
  };

  std::map<key_value, stored_row<Row>> keyed_;
  std::vector<stored_row<Row>> appended_;
  std::vector<undo_entry> undo_;
  std::optional<offset> watermark_;
  std::optional<offset> watermark_at_begin_;
  std::optional<position> position_;
  std::optional<position> staged_position_;
  std::optional<epoch> staged_owner_;
  epoch owner_{0};
  std::size_t runtime_max_rows_ = 0;
  std::size_t appended_at_begin_ = 0;
  std::size_t commits_ = 0;
  bool in_tx_ = false;
};

}  // namespace commit_order::memory
