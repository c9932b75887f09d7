// SPDX-License-Identifier: BSL-1.0
// The completion tracker against its model, on hand-picked and on random schedules.
#include <doctest/doctest.h>

#include <algorithm>
#include <ostream>  // doctest prints offsets and positions with their operator<<
#include <random>
#include <stdexcept>
#include <vector>

#include <commit_order/completion_tracker.hpp>

#include "support/tracker_model.hpp"

namespace co = commit_order;

TEST_CASE("the committable position is the lowest offset not yet completed") {
  co::completion_tracker t(co::position{10});
  CHECK(t.committable() == co::position{10});
  for (int o = 10; o < 15; ++o)
    t.start(co::offset{o});
  CHECK(t.in_flight() == 5);
  t.complete(co::offset{14});
  t.complete(co::offset{12});
  CHECK(t.committable() == co::position{10});  // 10 still runs: nothing may be committed
  t.complete(co::offset{10});
  CHECK(t.committable() == co::position{11});
  t.complete(co::offset{11});
  CHECK(t.committable() == co::position{13});  // 12 was done already
  t.complete(co::offset{13});
  CHECK(t.committable() == co::position{15});
  CHECK(t.idle());
}

TEST_CASE("offsets may have gaps (a compacted log)") {
  co::completion_tracker t(co::position{0});
  t.start(co::offset{3});
  t.start(co::offset{8});
  t.complete(co::offset{8});
  CHECK(t.committable() == co::position{3});
  t.complete(co::offset{3});
  CHECK(t.committable() == co::position{9});
}

TEST_CASE("misuse is reported, not absorbed") {
  co::completion_tracker t(co::position{5});
  CHECK_THROWS_AS(t.start(co::offset{4}), std::logic_error);  // below the start
  t.start(co::offset{6});
  CHECK_THROWS_AS(t.start(co::offset{6}), std::logic_error);     // not increasing
  CHECK_THROWS_AS(t.complete(co::offset{7}), std::logic_error);  // never started
  t.complete(co::offset{6});
  CHECK_THROWS_AS(t.complete(co::offset{6}), std::logic_error);  // completed twice
}

TEST_CASE("random schedules agree with the model") {
  std::mt19937_64 rng(20261129);
  for (int schedule = 0; schedule < 2000; ++schedule) {
    test_support::tracker_model model;
    model.start = co::position{static_cast<std::int64_t>(rng() % 50)};
    co::completion_tracker t(model.start);
    std::int64_t next = model.start.value();
    std::vector<std::int64_t> running;
    for (int step = 0; step < 60; ++step) {
      if (running.empty() || rng() % 3 != 0) {
        next += 1 + static_cast<std::int64_t>(rng() % 3);
        t.start(co::offset{next});
        model.started.insert(next);
        running.push_back(next);
      } else {
        const auto i = rng() % running.size();
        const std::int64_t o = running[i];
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        t.complete(co::offset{o});
        model.completed.insert(o);
      }
      REQUIRE(t.committable() == model.committable());
      REQUIRE(t.in_flight() == running.size());
    }
  }
}
