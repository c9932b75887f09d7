// SPDX-License-Identifier: BSL-1.0
// commit_order/completion_tracker.hpp — the committable position when work completes out of
// order.
//
// Records handed to an executor finish in any order. Committing the highest finished offset
// would skip the ones still running — the accidental at-most-once of a thread pool behind a
// consumer. The only safe position is the lowest offset not yet completed: everything before
// it is done, and a restart re-reads everything from it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <stdexcept>
#include <string>

#include "commit_order/offset.hpp"

namespace commit_order {

class completion_tracker final {
 public:
  /// `start` is the position before the first record that will be started.
  explicit completion_tracker(position start = position{0}) noexcept : floor_(start) {}

  /// A record was handed out. Offsets must be started in increasing order (gaps are fine: a
  /// compacted log skips offsets) and not below the starting position.
  void start(offset o) {
    const bool in_order = window_.empty() ? !floor_.covers(o) : window_.back().at < o;
    if (!in_order) {
      throw std::logic_error("completion_tracker: offset " + std::to_string(o.value()) +
                             " started out of order");
    }
    window_.push_back(slot{o, false});
  }

  /// A started record finished. Completing one that is not in flight is a logic error.
  void complete(offset o) {
    const auto it = std::lower_bound(window_.begin(), window_.end(), o,
                                     [](const slot& s, offset x) { return s.at < x; });
    if (it == window_.end() || it->at != o || it->done) {
      throw std::logic_error("completion_tracker: offset " + std::to_string(o.value()) +
                             " completed but not in flight");
    }
    it->done = true;
    while (!window_.empty() && window_.front().done) {
      floor_ = position::after(window_.front().at);
      window_.pop_front();
    }
  }

  /// The lowest offset not yet completed — the position it is safe to commit.
  [[nodiscard]] position committable() const noexcept {
    return window_.empty() ? floor_ : position::at(window_.front().at);
  }

  /// Records started and not yet completed.
  [[nodiscard]] std::size_t in_flight() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(window_.begin(), window_.end(), [](const slot& s) { return !s.done; }));
  }

  /// True when nothing is in flight.
  [[nodiscard]] bool idle() const noexcept { return window_.empty(); }

 private:
  struct slot {
    offset at;
    bool done;
  };
  std::deque<slot> window_;  // started records from the lowest incomplete one on, in order
  position floor_;           // committable when the window is empty
};

}  // namespace commit_order
