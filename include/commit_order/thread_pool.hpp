// SPDX-License-Identifier: BSL-1.0
// commit_order/thread_pool.hpp — a fixed set of worker threads, the executor a pipeline can hand
// its writes to (`with_executor<thread_pool>`).
//
// A pool that cannot start all its threads (pthread_create fails: EAGAIN when the system or the
// user is out of threads) throws that std::system_error, after joining the threads it started.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/executor.hpp"  // what with_executor<thread_pool> needs

namespace commit_order {

/// Starts a worker thread: what thread_pool uses unless it is given another starter.
struct start_jthread final {
  std::jthread operator()(std::function<void()> body) const {
    return std::jthread(std::move(body));
  }
};

class thread_pool final {
 public:
  /// Starts `threads` workers; throws std::system_error if one cannot be started.
  explicit thread_pool(std::size_t threads) : thread_pool(threads, start_jthread{}) {}

  /// As above, with `start(body)` starting each worker: the seam a test uses to make thread
  /// creation fail on cue, which no setting does reliably for a process running as root.
  template <class Start>
  requires std::is_same_v<std::invoke_result_t<Start&, std::function<void()>>, std::jthread>
  thread_pool(std::size_t threads, Start start) {
    if (threads == 0)
      throw std::invalid_argument("commit_order::thread_pool: needs at least one thread");
    workers_.reserve(threads);
    try {
      for (std::size_t i = 0; i < threads; ++i)
        workers_.push_back(start([this] { work(); }));
    } catch (...) {
      // The workers started so far wait for a task or for closing_, not for their stop token:
      // destroying them without closing would join forever, and the exception would never leave.
      close_and_join();
      throw;
    }
  }

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// Runs every task already queued, then stops the workers.
  ~thread_pool() { close_and_join(); }

  void execute(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

 private:
  void close_and_join() noexcept {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    ready_.notify_all();
    workers_.clear();  // jthread joins
  }

  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return closing_ || !tasks_.empty(); });
        if (tasks_.empty())
          return;  // closing, and nothing left to run
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool closing_ = false;
  std::vector<std::jthread> workers_;  // last: joined before the queue is destroyed
};

}  // namespace commit_order
