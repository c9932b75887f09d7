// SPDX-License-Identifier: BSL-1.0
// Real consumer processes reading a Kafka topic, really killed: the mock cluster lives in this
// (the supervising) process, each child connects to it over loopback with a manual assignment,
// and is SIGKILLed at random moments and restarted until it has consumed the topic; then its
// SQLite table is reconciled against what was produced. 180 kills per run across the four
// policies, AtMostOnce<AutoCommit> on librdkafka's own auto-commit.
#include <doctest/doctest.h>

#include <filesystem>
#include <numeric>

#include "lab/report.hpp"
#include "lab/supervisor.hpp"
#include "support/scratch.hpp"

namespace {

crash_lab::policy_outcome run(crash_lab::policy_id policy, int kills, std::int64_t records,
                              const test_support::scratch_dir& dir) {
  crash_lab::lab_config config;
  config.executable = std::filesystem::read_symlink("/proc/self/exe");
  config.work_dir = dir.path();
  config.source = crash_lab::source_kind::kafka;
  config.records = records;
  config.orders = records / 8;
  config.kills = kills;
  config.seed = 20261201 + static_cast<std::uint64_t>(policy);
  config.batch = 8;
  config.pace = std::chrono::microseconds(150);
  config.auto_commit = std::chrono::milliseconds(50);
  const auto outcomes = crash_lab::run_lab(config, {policy});
  REQUIRE(outcomes.size() == 1);
  const auto& o = outcomes.front();
  MESSAGE(crash_lab::display_name(policy)
          << " (Kafka): " << o.kills << " kills, " << o.children << " starts, " << o.rows_lost
          << " lost, " << o.duplicate_rows << " duplicate, " << o.regressed_rows << " regressed, "
          << o.replays_absorbed << " replays absorbed, " << o.seconds << " s");
  // Every requested kill landed while the consumer was working.
  CHECK(o.kills == kills);
  CHECK(o.records == records);
  CHECK(o.mismatched_rows == 0);
  return o;
}

}  // namespace

TEST_CASE("Kafka, TransactionalPosition under 50 SIGKILLs: nothing lost, duplicated or regressed") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::transactional, 50, 2000, dir);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  CHECK(o.replays_absorbed == 0);  // exactly once in the sink's state: nothing re-applied
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("Kafka, AtLeastOnce under 50 SIGKILLs: replays absorbed, nothing lost or duplicated") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_least_once, 50, 2000, dir);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  CHECK(o.replays_absorbed > 0);  // the replays happened, and the offset guard absorbed them
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("Kafka, AtMostOnce under 40 SIGKILLs: committed to Kafka first, loss bounded per kill") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once, 40, 1600, dir);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  REQUIRE(o.lost_per_kill.size() == 40);
  for (std::int64_t lost : o.lost_per_kill) {
    CHECK(lost >= 0);
    CHECK(lost <= 8);  // one unit of work
  }
  // Every record the final reconciliation misses was attributed to a kill as it happened.
  CHECK(o.rows_lost ==
        std::accumulate(o.lost_per_kill.begin(), o.lost_per_kill.end(), std::int64_t{0}));
  CHECK(o.rows_lost > 0);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("Kafka, AtMostOnce<AutoCommit> under 40 SIGKILLs on librdkafka's auto-commit") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once_auto, 40, 1600, dir);
  CHECK(o.duplicate_rows == 0);  // the keyed sink R1 demands
  CHECK(crash_lab::violations(o, 8).empty());
}
