// SPDX-License-Identifier: BSL-1.0
// The trivial model of a completion tracker: sets of started and completed offsets. The
// committable position is the lowest started offset not completed, or just past the highest
// started one when all are done (the start position when none were started).
#pragma once

#include <cstdint>
#include <set>

#include <commit_order/offset.hpp>

namespace test_support {

struct tracker_model {
  commit_order::position start{0};
  std::set<std::int64_t> started, completed;

  [[nodiscard]] commit_order::position committable() const {
    for (const std::int64_t o : started) {
      if (!completed.contains(o))
        return commit_order::position{o};
    }
    return started.empty() ? start : commit_order::position{*started.rbegin() + 1};
  }
};

}  // namespace test_support
