// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/log.hpp — an in-memory append-only log with retention.
//
// Part of the testing kit: a source with Kafka's offset semantics (offsets start at 0 and only
// grow; retention deletes from the front and moves earliest()), cheap enough for benchmarks.
// The log is itself a source with one cursor; `make_reader()` gives further, independent cursors
// over the same records, as several consumers of one partition have (two pipelines over the
// log object itself would share its one cursor).
//
// Its durability is what the test says it stands for: `Volatile` by default (it dies with the
// process). Rule R9c refuses a source less durable than the position stored for it, so a test
// that pairs it with a durable sink or store names the log it stands for, `log<E, Synced>`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"

namespace commit_order::memory {

template <class Event, durability_level Durability = Volatile>
class log final {
 public:
  using record_type = logged<Event>;
  /// The durability the log stands for (rule R9c compares it with the position's).
  using capabilities = commit_order::capabilities<Durability>;

  /// Appends an event and returns the offset it was given.
  offset append(Event event) {
    const offset at{base_ + static_cast<offset::value_type>(records_.size())};
    records_.push_back(record_type{at, std::move(event)});
    return at;
  }

  class reader;

  /// Moves the read position. Seeking below earliest() is a lost position, never a reset.
  void seek(position p) { seek_cursor(read_, p); }

  /// Up to `max` records from the read position; advances the read position past them.
  /// The span stays valid until the next append() or truncate_before().
  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    return poll_cursor(read_, max);
  }

  /// A further cursor over this log's records, starting at earliest(). It must not outlive
  /// the log.
  [[nodiscard]] reader make_reader() const noexcept { return reader(*this); }

  /// Position of the first record still retained.
  [[nodiscard]] position earliest() const noexcept { return position{base_}; }
  /// Position just past the last record.
  [[nodiscard]] position end() const noexcept {
    return position{base_ + static_cast<position::value_type>(records_.size())};
  }
  /// Where the next poll() reads.
  [[nodiscard]] position read_position() const noexcept { return read_; }

  /// Retention: deletes every record before `p`. A cursor that has not reached `p` gets
  /// `position_lost` on its next poll, as a consumer behind a log's retention does.
  void truncate_before(position p) {
    const auto cut = std::clamp(p.value(), base_, end().value());
    records_.erase(records_.begin(), records_.begin() + (cut - base_));
    base_ = cut;
  }

  /// The retained records, oldest first.
  [[nodiscard]] std::span<const record_type> records() const noexcept { return records_; }

  /// An independent cursor over a log: a source of its own.
  class reader final {
   public:
    using capabilities = typename log::capabilities;
    explicit reader(const log& l) noexcept : log_(&l), read_(l.earliest()) {}
    void seek(position p) { log_->seek_cursor(read_, p); }
    [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
      return log_->poll_cursor(read_, max);
    }
    [[nodiscard]] position earliest() const noexcept { return log_->earliest(); }
    [[nodiscard]] position end() const noexcept { return log_->end(); }
    [[nodiscard]] position read_position() const noexcept { return read_; }

   private:
    const log* log_;
    position read_;
  };

 private:
  void seek_cursor(position& cursor, position p) const {
    if (p < earliest())
      throw position_lost(p, earliest());
    if (p > end())
      throw position_beyond_end(p, end());
    cursor = p;
  }

  std::span<const record_type> poll_cursor(position& cursor, std::size_t max) const {
    if (cursor < earliest())
      throw position_lost(cursor, earliest());
    const auto first = static_cast<std::size_t>(cursor.value() - base_);
    const auto count = std::min(max, records_.size() - first);
    cursor = position{cursor.value() + static_cast<position::value_type>(count)};
    return std::span<const record_type>(records_).subspan(first, count);
  }

  std::vector<record_type> records_;
  offset::value_type base_ = 0;
  position read_{0};
};

}  // namespace commit_order::memory
