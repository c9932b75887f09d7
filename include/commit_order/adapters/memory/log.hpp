// commit_order/adapters/memory/log.hpp — an in-memory append-only log with retention.
//
// Part of the testing kit: a source with Kafka's offset semantics (offsets start at 0 and only
// grow; retention deletes from the front and moves earliest()), cheap enough for benchmarks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"

namespace commit_order::memory {

template <class Event>
class log final {
 public:
  using record_type = logged<Event>;

  /// Appends an event and returns the offset it was given.
  offset append(Event event) {
    const offset at{base_ + static_cast<offset::value_type>(records_.size())};
    records_.push_back(record_type{at, std::move(event)});
    return at;
  }

  /// Moves the read position. Seeking below earliest() is a lost position, never a reset.
  void seek(position p) {
    if (p < earliest())
      throw position_lost(p, earliest());
    if (p > end())
      throw position_beyond_end(p, end());
    read_ = p;
  }

  /// Up to `max` records from the read position; advances the read position past them.
  /// The span stays valid until the next append() or truncate_before().
  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    const auto first = static_cast<std::size_t>(read_.value() - base_);
    const auto count = std::min(max, records_.size() - first);
    read_ = position{read_.value() + static_cast<position::value_type>(count)};
    return std::span<const record_type>(records_).subspan(first, count);
  }

  /// Position of the first record still retained.
  [[nodiscard]] position earliest() const noexcept { return position{base_}; }
  /// Position just past the last record.
  [[nodiscard]] position end() const noexcept {
    return position{base_ + static_cast<position::value_type>(records_.size())};
  }
  /// Where the next poll() reads.
  [[nodiscard]] position read_position() const noexcept { return read_; }

  /// Retention: deletes every record before `p`. A reader positioned there keeps reading; a
  /// consumer whose stored position is older gets `position_lost` on recovery.
  void truncate_before(position p) {
    const auto cut = std::clamp(p.value(), base_, end().value());
    records_.erase(records_.begin(), records_.begin() + (cut - base_));
    base_ = cut;
    read_ = std::max(read_, earliest());
  }

  /// The retained records, oldest first.
  [[nodiscard]] std::span<const record_type> records() const noexcept { return records_; }

 private:
  std::vector<record_type> records_;
  offset::value_type base_ = 0;
  position read_{0};
};

}  // namespace commit_order::memory
