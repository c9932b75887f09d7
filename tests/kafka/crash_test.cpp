// SPDX-License-Identifier: BSL-1.0
// Real consumer processes reading a Kafka topic, really killed: the mock cluster lives in this
// (the supervising) process, each child connects to it over loopback with a manual assignment,
// and is SIGKILLed at random moments and restarted until it has consumed the topic; then its
// SQLite table is reconciled against what was produced. 180 kills per run across the four
// policies, AtMostOnce<AutoCommit> on librdkafka's own auto-commit.
#include <doctest/doctest.h>

#include <filesystem>

#include "support/crash_runs.hpp"
#include "support/lab/report.hpp"
#include "support/lab/supervisor.hpp"
#include "support/scratch.hpp"

namespace {

crash_lab::policy_outcome run(crash_lab::policy_id policy, int kills, std::int64_t records,
                              const test_support::scratch_dir& dir) {
  auto config = test_support::crash_config(policy, kills, records, 20261201, dir);
  config.source = crash_lab::source_kind::kafka;
  return test_support::run_crash_lab(config, policy, " (Kafka)");
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
  test_support::check_loss_accounted(o, 40);
  CHECK(o.rows_lost > 0);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("Kafka, AtMostOnce<AutoCommit> under 40 SIGKILLs on librdkafka's auto-commit") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once_auto, 40, 1600, dir);
  CHECK(o.duplicate_rows == 0);  // the keyed sink R1 demands
  CHECK(crash_lab::violations(o, 8).empty());
}
