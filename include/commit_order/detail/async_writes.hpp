// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/async_writes.hpp — the shared state of writes handed to an executor
// (private).
//
// Workers report each record as completed, failed or abandoned (a task destroyed without
// running, as when an executor is torn down by a crash). The pipeline thread reads, per
// partition, the committable position — the lowest offset not yet completed — and the
// failures.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
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
    partition_id partition;
    offset at;
    Event event;
    std::exception_ptr error;
  };

  /// Forgets every partition and everything in flight: used by recovery, after the previous
  /// tasks have finished.
  void clear() {
    std::lock_guard lock(mutex_);
    trackers_.clear();
    failures_.clear();
  }

  /// Starts tracking partition `k` at `start` (again, if it was tracked).
  void reset(partition_id k, position start) {
    std::lock_guard lock(mutex_);
    tracker(k) = completion_tracker(start);
    std::erase_if(failures_, [k](const failure& f) { return f.partition == k; });
  }

  /// Stops tracking partition `k` (revoked or lost): reports of it that still arrive are
  /// ignored for the position, though they still count as finished.
  void forget(partition_id k) {
    std::lock_guard lock(mutex_);
    std::erase_if(trackers_, [k](const auto& t) { return t.first == k; });
    std::erase_if(failures_, [k](const failure& f) { return f.partition == k; });
  }

  /// Registers a record about to be handed out.
  void started(partition_id k, offset o) {
    std::lock_guard lock(mutex_);
    tracker(k).start(o);
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

  void completed(partition_id k, offset o) {
    {
      std::lock_guard lock(mutex_);
      if (completion_tracker* t = find(k))
        t->complete(o);
      --outstanding_;
    }
    changed_.notify_all();
  }

  /// The record stays incomplete: the position can never pass it.
  void failed(partition_id k, offset o, Event event, std::exception_ptr error) {
    {
      std::lock_guard lock(mutex_);
      if (find(k) != nullptr)
        failures_.push_back(failure{k, o, std::move(event), std::move(error)});
      --outstanding_;
    }
    changed_.notify_all();
  }

  /// A task that never ran (the executor dropped it, or could not take it). Its record stays
  /// incomplete, and it is reported like a failed write: a position that silently stopped
  /// moving would be the worst of both directions.
  void abandoned(partition_id k, offset o, Event event) {
    failed(k, o, std::move(event),
           std::make_exception_ptr(std::runtime_error("the executor dropped the write of offset " +
                                                      std::to_string(o.value()))));
  }

  /// A failed record was written durably elsewhere (dead letters): the position may pass it.
  void settled(partition_id k, offset o) {
    std::lock_guard lock(mutex_);
    if (completion_tracker* t = find(k))
      t->complete(o);
  }

  /// The lowest offset of partition `k` not yet completed (nothing when `k` is not tracked).
  [[nodiscard]] std::optional<position> committable(partition_id k) {
    std::lock_guard lock(mutex_);
    if (completion_tracker* t = find(k))
      return t->committable();
    return std::nullopt;
  }

  [[nodiscard]] std::vector<failure> take_failures() {
    std::lock_guard lock(mutex_);
    return std::exchange(failures_, {});
  }

 private:
  completion_tracker* find(partition_id k) {
    for (auto& [id, t] : trackers_)
      if (id == k)
        return &t;
    return nullptr;
  }
  completion_tracker& tracker(partition_id k) {
    if (completion_tracker* t = find(k))
      return *t;
    return trackers_.emplace_back(k, completion_tracker(position{0})).second;
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::pair<partition_id, completion_tracker>> trackers_;
  std::vector<failure> failures_;
  std::size_t outstanding_ = 0;
};

/// One handed-out write: its record, and the report that it was abandoned unless it ran.
/// Shared by the copies std::function may make of the task.
template <class Event>
struct async_ticket final {
  std::shared_ptr<async_writes<Event>> state;
  partition_id partition;
  offset at;
  Event event;
  bool ran = false;
  async_ticket(std::shared_ptr<async_writes<Event>> s, partition_id k, offset o, Event e)
      : state(std::move(s)), partition(k), at(o), event(std::move(e)) {
    state->started(partition, at);  // last: a ticket that failed to construct never counted
  }
  async_ticket(const async_ticket&) = delete;
  async_ticket& operator=(const async_ticket&) = delete;
  ~async_ticket() {
    if (!ran)
      state->abandoned(partition, at, std::move(event));
  }
};

}  // namespace commit_order::detail
