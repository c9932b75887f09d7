// commit_order/thread_pool.hpp — a fixed set of worker threads, the executor a pipeline can hand
// its writes to (`with_executor<thread_pool>`).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

namespace commit_order {

class thread_pool final {
 public:
  explicit thread_pool(std::size_t threads) {
    if (threads == 0)
      throw std::invalid_argument("commit_order::thread_pool: needs at least one thread");
    workers_.reserve(threads);
    for (std::size_t i = 0; i < threads; ++i) {
      workers_.emplace_back([this](std::stop_token stop) { work(stop); });
    }
  }

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// Runs every task already queued, then stops the workers.
  ~thread_pool() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    ready_.notify_all();
    workers_.clear();  // jthread joins
  }

  void execute(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

 private:
  void work(const std::stop_token&) {
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
