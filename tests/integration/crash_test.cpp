// SPDX-License-Identifier: BSL-1.0
// Real processes, really killed: each policy's consumer is SIGKILLed at random moments and
// restarted until it has consumed the log, then its SQLite table is reconciled against the
// log. 210 kills per run across the four policies.
#include <doctest/doctest.h>

#include <filesystem>

#include "support/crash_runs.hpp"
#include "support/lab/report.hpp"
#include "support/lab/supervisor.hpp"
#include "support/scratch.hpp"

namespace {

crash_lab::policy_outcome run(crash_lab::policy_id policy, int kills, std::int64_t records,
                              const test_support::scratch_dir& dir) {
  const auto config = test_support::crash_config(policy, kills, records, 20240611, dir);
  return test_support::run_crash_lab(config, policy, "");
}

}  // namespace

TEST_CASE("TransactionalPosition under 70 SIGKILLs: nothing lost, duplicated or regressed") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::transactional, 70, 1600, dir);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  // Exactly once in the sink's state: a restart never re-applies a committed record, so the
  // guard never has anything to absorb.
  CHECK(o.replays_absorbed == 0);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("AtLeastOnce under 70 SIGKILLs: replays absorbed, nothing lost, duplicated, regressed") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_least_once, 70, 1600, dir);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  // The replays happened (the failure direction is real) and the offset guard absorbed them.
  CHECK(o.replays_absorbed > 0);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("AtMostOnce under 40 SIGKILLs: loss bounded by one unit per kill, and accounted for") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once, 40, 1200, dir);
  test_support::check_loss_accounted(o, 40);
  // Commit-then-write does lose: kills mid-batch skip the rest of the batch.
  CHECK(o.rows_lost > 0);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("AtMostOnce<AutoCommit> under 30 SIGKILLs: its keyed sink still has no duplicate rows") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once_auto, 30, 1000, dir);
  CHECK(o.duplicate_rows == 0);
  CHECK(crash_lab::violations(o, 8).empty());
}
