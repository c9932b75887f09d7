// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/manual_executor.hpp — an executor that runs tasks only when told.
//
// Part of the testing kit: with `with_executor<manual_executor>` a test decides which handed-out
// writes complete, in which order, and which never run (`discard`, as a crash would have it), so
// out-of-order completion is reproducible without threads.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "commit_order/executor.hpp"  // what with_executor<manual_executor> needs

namespace commit_order::memory {

class manual_executor final {
 public:
  void execute(std::function<void()> task) { tasks_.push_back(std::move(task)); }

  /// Tasks handed out and not yet run or discarded.
  [[nodiscard]] std::size_t pending() const noexcept { return tasks_.size(); }

  /// Runs the i-th pending task (in hand-out order) and removes it.
  void run(std::size_t i) {
    if (i >= tasks_.size())
      throw std::out_of_range("manual_executor: no such pending task");
    auto task = std::move(tasks_[i]);
    tasks_.erase(tasks_.begin() + static_cast<std::ptrdiff_t>(i));
    task();
  }

  /// Runs every pending task, newest first (the least convenient order for a position).
  void run_all_reversed() {
    while (!tasks_.empty())
      run(tasks_.size() - 1);
  }

  /// Runs every pending task in hand-out order.
  void run_all() {
    while (!tasks_.empty())
      run(0);
  }

  /// Runs the oldest pending task, if any: what the pipeline calls while it waits for its
  /// writes (back-pressure, the final drain). Returns false when nothing was pending.
  bool drive() {
    if (tasks_.empty())
      return false;
    run(0);
    return true;
  }

  /// Drops every pending task unrun: the writes a crash cut off.
  void discard() { tasks_.clear(); }

 private:
  std::vector<std::function<void()>> tasks_;
};

}  // namespace commit_order::memory
