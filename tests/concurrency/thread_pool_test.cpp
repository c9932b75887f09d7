// SPDX-License-Identifier: BSL-1.0
// The thread pool itself: a pool that cannot start all its threads throws, and joins the
// threads it did start, instead of hanging in its own unwinding.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include <commit_order/thread_pool.hpp>

namespace co = commit_order;

namespace {

// Starts real threads until `limit` have started, then fails as pthread_create does when the
// system is out of threads. Counts the threads that have finished, so a test can see them
// joined rather than left running.
struct failing_starter {
  int limit = 0;
  std::shared_ptr<std::atomic<int>> started = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> finished = std::make_shared<std::atomic<int>>(0);

  std::jthread operator()(std::function<void()> body) {
    if (started->load() == limit)
      throw std::system_error(EAGAIN, std::generic_category(), "pthread_create");
    ++*started;
    return std::jthread([body = std::move(body), finished = finished] {
      body();
      ++*finished;
    });
  }
};

// Runs `f` on its own thread and gives up after a minute: a deadlock must fail the test, not
// hang the run. The hung thread cannot be joined, so the process ends there.
template <class F>
void within_a_minute(F f) {
  std::packaged_task<void()> task(std::move(f));
  auto done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(std::chrono::minutes(1)) != std::future_status::ready) {
    std::cerr << "FATAL: deadlock: the call did not return within a minute\n" << std::flush;
    std::_Exit(EXIT_FAILURE);
  }
  runner.join();
  done.get();
}

}  // namespace

TEST_CASE("a pool whose third thread cannot start throws, after joining the two it started") {
  failing_starter start{.limit = 2};
  within_a_minute([&] {
    try {
      co::thread_pool pool(4, start);
      FAIL("the pool was built without its threads");
    } catch (const std::system_error& e) {
      CHECK(e.code() == std::errc::resource_unavailable_try_again);
    }
  });
  CHECK(start.started->load() == 2);
  // Joined, not detached: both workers returned before the constructor's exception left it.
  CHECK(start.finished->load() == 2);
}

TEST_CASE("a pool whose first thread cannot start throws at once") {
  failing_starter start{.limit = 0};
  within_a_minute([&] { CHECK_THROWS_AS(co::thread_pool(3, start), std::system_error); });
  CHECK(start.started->load() == 0);
}

TEST_CASE("a pool runs every queued task before its destructor returns") {
  std::atomic<int> ran{0};
  failing_starter start{.limit = 3};
  {
    co::thread_pool pool(3, start);
    for (int i = 0; i < 100; ++i)
      pool.execute([&ran] { ++ran; });
  }
  CHECK(ran.load() == 100);
  CHECK(start.finished->load() == 3);
}
