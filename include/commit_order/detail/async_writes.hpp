// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/async_writes.hpp — the shared state of writes handed to an executor
// (private).
//
// Workers report each record as completed, failed or abandoned (a task destroyed without
// running, as when an executor is torn down by a crash). The pipeline thread reads the
// committable position — the lowest offset not yet completed — and the failures.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "commit_order/completion_tracker.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::detail {

template <class Event>
class async_writes final {
 public:
  struct failure {
    offset at;
    Event event;
    std::exception_ptr error;
  };

  /// Forgets everything in flight: used by recovery, after the previous tasks have finished.
  void reset(position start) {
    std::lock_guard lock(mutex_);
    tracker_ = completion_tracker(start);
    failures_.clear();
  }

  /// Registers a record about to be handed out.
  void started(offset o) {
    std::lock_guard lock(mutex_);
    tracker_.start(o);
    ++outstanding_;
  }

  /// Tasks handed out and not yet completed, failed or abandoned.
  [[nodiscard]] std::size_t outstanding() {
    std::lock_guard lock(mutex_);
    return outstanding_;
  }

  /// Waits until fewer than `n` tasks are outstanding.
  void wait_below(std::size_t n) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return outstanding_ < n; });
  }

  void completed(offset o) {
    {
      std::lock_guard lock(mutex_);
      tracker_.complete(o);
      --outstanding_;
    }
    changed_.notify_all();
  }

  /// The record stays incomplete: the position can never pass it.
  void failed(offset o, Event event, std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      failures_.push_back(failure{o, std::move(event), std::move(error)});
      --outstanding_;
    }
    changed_.notify_all();
  }

  /// A task that never ran (the executor dropped it, or could not take it). Its record stays
  /// incomplete, and it is reported like a failed write: a position that silently stopped
  /// moving would be the worst of both directions.
  void abandoned(offset o, Event event) {
    failed(o, std::move(event),
           std::make_exception_ptr(std::runtime_error("the executor dropped the write of offset " +
                                                      std::to_string(o.value()))));
  }

  /// A failed record was written durably elsewhere (dead letters): the position may pass it.
  void settled(offset o) {
    std::lock_guard lock(mutex_);
    tracker_.complete(o);
  }

  [[nodiscard]] position committable() {
    std::lock_guard lock(mutex_);
    return tracker_.committable();
  }

  [[nodiscard]] std::vector<failure> take_failures() {
    std::lock_guard lock(mutex_);
    return std::exchange(failures_, {});
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  completion_tracker tracker_;
  std::vector<failure> failures_;
  std::size_t outstanding_ = 0;
};

/// One handed-out write: its record, and the report that it was abandoned unless it ran.
/// Shared by the copies std::function may make of the task.
template <class Event>
struct async_ticket final {
  std::shared_ptr<async_writes<Event>> state;
  offset at;
  Event event;
  bool ran = false;
  async_ticket(std::shared_ptr<async_writes<Event>> s, offset o, Event e)
      : state(std::move(s)), at(o), event(std::move(e)) {
    state->started(at);  // last: a ticket that failed to construct never counted
  }
  async_ticket(const async_ticket&) = delete;
  async_ticket& operator=(const async_ticket&) = delete;
  ~async_ticket() {
    if (!ran)
      state->abandoned(at, std::move(event));
  }
};

}  // namespace commit_order::detail
