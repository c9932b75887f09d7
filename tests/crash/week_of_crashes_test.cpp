// SPDX-License-Identifier: BSL-1.0
// A week of crashes (examples/week_of_crashes.hpp), asserted: at 2000 records/s with a 5 s
// commit, an unclean shutdown loses at most 10,000 records under auto-commit and nothing under
// AtLeastOnce or TransactionalPosition; the replays AtLeastOnce absorbs are bounded the same way.
#include <doctest/doctest.h>

#include <cstdint>

#include "week_of_crashes.hpp"

namespace wc = week_of_crashes;

namespace {

void check_bounds(const wc::week_result& w) {
  const std::int64_t in_flight = w.params.batch();
  REQUIRE(w.policies.size() == 3);
  for (const wc::policy_result& r : w.policies) {
    INFO(r.policy);
    CHECK(r.mismatches.empty());
    for (const std::string& m : r.mismatches)
      FAIL_CHECK(m);
    CHECK(r.bad_rows == 0);
    CHECK(r.crashes.size() + static_cast<std::size_t>(r.down_hits) ==
          static_cast<std::size_t>(w.params.crashes()));
    std::int64_t lost = 0;
    for (const wc::crash_report& c : r.crashes) {
      lost += c.lost;
      // Neither direction exceeds what one commit interval puts in flight.
      CHECK(c.lost <= in_flight);
      CHECK(c.replayed <= in_flight);
      CHECK(c.redone <= in_flight);
    }
    CHECK(lost == r.lost);
    // Every record consumed is either a row of the sink or counted as lost.
    CHECK(r.rows + r.lost == r.records);
  }
  const wc::policy_result& auto_commit = w.policies[0];
  const wc::policy_result& at_least_once = w.policies[1];
  const wc::policy_result& transactional = w.policies[2];
  CHECK(auto_commit.largest_loss <= in_flight);
  CHECK(at_least_once.lost == 0);
  CHECK(at_least_once.sink_as_expected());
  CHECK(transactional.lost == 0);
  CHECK(transactional.absorbed == 0);
  CHECK(transactional.sink_as_expected());
  for (const wc::crash_report& c : transactional.crashes)
    CHECK(c.replayed == 0);
}

}  // namespace

TEST_CASE("a week of crashes: a week at 2000 records/s with a 5 s commit and 2 crashes") {
  const wc::parameters p;  // docs/failure-directions.md's numbers
  REQUIRE(p.batch() == 10000);
  REQUIRE(p.crashes() == 2);
  const wc::week_result w = wc::simulate(p);
  check_bounds(w);
  // A week of records went by (less the fetch latencies and the downtime).
  for (const wc::policy_result& r : w.policies)
    CHECK(r.records > 1'200'000'000);
}

TEST_CASE("a week of crashes: raised crash rate reaches both of auto-commit's directions") {
  wc::parameters p;
  p.crashes_per_week = 60;
  p.seed = 7;
  const wc::week_result w = wc::simulate(p);
  check_bounds(w);
  const wc::policy_result& auto_commit = w.policies[0];
  const wc::policy_result& at_least_once = w.policies[1];
  const wc::policy_result& transactional = w.policies[2];
  // MayLoseAndDuplicate: the timer ran ahead of the write in some crashes, behind it in others.
  CHECK(auto_commit.lost > 0);
  CHECK(auto_commit.absorbed > 0);
  CHECK_FALSE(auto_commit.sink_as_expected());
  // MayDuplicate: replays happened and were absorbed, nothing was lost.
  CHECK(at_least_once.absorbed > 0);
  CHECK(at_least_once.largest_replay > 0);
  // ExactlyOnceInSink: the open transactions were rolled back and redone, never duplicated.
  std::int64_t redone = 0;
  for (const wc::crash_report& c : transactional.crashes)
    redone += c.redone;
  CHECK(redone > 0);
}

TEST_CASE("a week of crashes: the timer arithmetic matches the real pipeline batch after batch") {
  wc::parameters p;
  // The example's latencies: the timer drifts slowly through the batch.
  CHECK(wc::auto_commit_lane(p).validate_timer_model(wc::boundary{}, 30) >= 30);
  // Long fetches: the drift wraps around within a few batches, so the timer also fires at the
  // poll itself (before a single row is written) and at the batch's last row.
  p.max_fetch_latency_us = 1'500'000;
  CHECK(wc::auto_commit_lane(p).validate_timer_model(wc::boundary{}, 30) >= 30);
  const wc::boundary mid{123'450'000, wc::time_point{std::chrono::hours{30}},
                         wc::time_point{std::chrono::hours{30} - std::chrono::seconds{2}}};
  CHECK(wc::auto_commit_lane(p).validate_timer_model(mid, 30) >= 30);
}
