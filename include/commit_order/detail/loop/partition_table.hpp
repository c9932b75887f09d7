// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/partition_table.hpp — what the loop keeps per partition (private).
//
// One model: the loop keeps an entry per partition it owns (read and committed positions, the
// epoch it claimed, the last gap moved over) and, for the unit being run, the position each of
// the unit's partitions moves to. A partitioned source's partitions come and go with its
// assignment; a single-partition source's one partition, 0, is always owned, and its table
// folds away: the same loop compiles to what a loop written for one partition would be.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "commit_order/concepts.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"

namespace commit_order::detail {

template <class Entry, bool OnePartition>
class partition_table;

/// The partitions of a partitioned source: those it owns now, in ascending order.
template <class Entry>
class partition_table<Entry, false> {
 public:
  const Entry* find(partition_id k) const noexcept {
    for (const Entry& e : parts_)
      if (e.id == k)
        return &e;
    return nullptr;
  }
  Entry* find(partition_id k) noexcept {
    for (Entry& e : parts_)
      if (e.id == k)
        return &e;
    return nullptr;
  }
  /// Partition k's entry, made (in order) if it has none.
  Entry& entry(partition_id k) {
    if (Entry* e = find(k))
      return *e;
    const auto at = std::ranges::lower_bound(parts_, k, {}, &Entry::id);
    Entry fresh{};
    fresh.id = k;
    return *parts_.insert(at, fresh);
  }
  std::span<Entry> all() noexcept { return parts_; }
  std::span<const Entry> all() const noexcept { return parts_; }
  void clear() noexcept { parts_.clear(); }
  void forget(partition_id k) {
    std::erase_if(parts_, [k](const Entry& e) { return e.id == k; });
  }

  /// Each partition's read position moves past its last record in [first, last).
  template <class It>
  void note_read(It first, It last) {
    for (It it = first; it != last; ++it)
      entry(partition_of(*it)).read = position::after(offset_of(*it));
  }
  /// The position each partition [first, last) touches moves to, in ascending partition order:
  /// positions are stored in that order (the same lock order in every consumer).
  template <class It>
  void mark_unit(It first, It last) {
    unit_ends_.clear();
    for (It it = first; it != last; ++it) {
      const partition_id k = partition_of(*it);
      const position next = position::after(offset_of(*it));
      auto found = std::ranges::find(unit_ends_, k, &start_at::partition);
      if (found == unit_ends_.end()) {
        unit_ends_.push_back(start_at{k, next});
      } else {
        found->at = next;
      }
    }
    std::ranges::sort(unit_ends_, {}, &start_at::partition);
  }
  /// The positions the last marked unit moves its partitions to (`unit_end` is its last
  /// record's, which only a single partition's table needs).
  std::span<const start_at> unit_ends(position /*unit_end*/) const noexcept { return unit_ends_; }
  /// Calls f(start_at) for each of them.
  template <class F>
  void each_unit_end(position /*unit_end*/, F&& f) const {
    for (const start_at& s : unit_ends_)
      f(s);
  }

 private:
  std::vector<Entry> parts_;
  std::vector<start_at> unit_ends_;
};

/// A single-partition source's one partition, 0, always owned. Every partition id names it:
/// its records may name the stream's partition they come from (a Kafka partition_source's
/// name the topic's), and a position asked for under that name is this one.
template <class Entry>
class partition_table<Entry, true> {
 public:
  const Entry* find(partition_id /*any*/) const noexcept { return &one_; }
  Entry* find(partition_id /*any*/) noexcept { return &one_; }
  Entry& entry(partition_id /*always 0*/) noexcept { return one_; }
  std::span<Entry, 1> all() noexcept { return std::span<Entry, 1>(&one_, 1); }
  std::span<const Entry, 1> all() const noexcept { return std::span<const Entry, 1>(&one_, 1); }
  void clear() noexcept {}
  void forget(partition_id) noexcept {}

  template <class It>
  void note_read(It /*first*/, It last) noexcept {
    one_.read = position::after(offset_of(*(last - 1)));
  }
  template <class It>
  void mark_unit(It, It) noexcept {}
  /// The unit moves partition 0 to `unit_end`.
  static std::array<start_at, 1> unit_ends(position unit_end) noexcept {
    return {start_at{partition_id{0}, unit_end}};
  }
  /// Calls f(start_at) for it, by value: nothing of it is kept in memory.
  template <class F>
  static void each_unit_end(position unit_end, F&& f) {
    f(start_at{partition_id{0}, unit_end});
  }

 private:
  Entry one_{};
};

}  // namespace commit_order::detail
