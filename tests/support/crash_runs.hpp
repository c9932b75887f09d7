// SPDX-License-Identifier: BSL-1.0
// What the SIGKILL tests over the crash lab share (tests/integration/crash_test.cpp on a file
// log, tests/kafka/crash_test.cpp on a Kafka topic, tests/postgres/postgres_process_test.cpp on
// PostgreSQL): the lab's settings for a test, one policy's run with the checks that hold under
// every policy, and AtMostOnce's accounting of its loss. Each test names its source or sink and
// what its policy promises.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <string_view>

#include "support/lab/report.hpp"
#include "support/lab/supervisor.hpp"
#include "support/scratch.hpp"

namespace test_support {

/// Records per unit of work in every crash test: AtMostOnce loses at most this many per kill.
inline constexpr std::int64_t crash_batch = 8;

/// The lab's settings for a test of `policy`: `kills` SIGKILLs of this executable's --child
/// consumer while it reads `records` records (8 per order), paced so that the kills land
/// mid-unit. The seed is `seed` plus the policy, so each policy is killed at other moments.
inline crash_lab::lab_config crash_config(crash_lab::policy_id policy, int kills,
                                          std::int64_t records, std::uint64_t seed,
                                          const scratch_dir& dir) {
  crash_lab::lab_config config;
  config.executable = std::filesystem::read_symlink("/proc/self/exe");
  config.work_dir = dir.path();
  config.records = records;
  config.orders = records / 8;
  config.kills = kills;
  config.seed = seed + static_cast<std::uint64_t>(policy);
  config.batch = static_cast<std::size_t>(crash_batch);
  config.pace = std::chrono::microseconds(150);
  config.auto_commit = std::chrono::milliseconds(50);
  return config;
}

/// Runs `policy` under `config` and checks what holds under every policy: every requested kill
/// landed while the consumer was working, every record was consumed, and no row holds other
/// values than the log's event for its key. `where` follows the policy's name in the message
/// ("", " (Kafka)", " on PostgreSQL").
inline crash_lab::policy_outcome run_crash_lab(const crash_lab::lab_config& config,
                                               crash_lab::policy_id policy,
                                               std::string_view where) {
  const auto outcomes = crash_lab::run_lab(config, {policy});
  REQUIRE(outcomes.size() == 1);
  const auto& o = outcomes.front();
  MESSAGE(crash_lab::display_name(policy)
          << where << ": " << o.kills << " kills, " << o.children << " starts, " << o.rows_lost
          << " lost, " << o.duplicate_rows << " duplicate, " << o.regressed_rows << " regressed, "
          << o.replays_absorbed << " replays absorbed, " << o.seconds << " s");
  CHECK(o.kills == config.kills);
  CHECK(o.records == config.records);
  CHECK(o.mismatched_rows == 0);
  return o;
}

/// AtMostOnce's promise, short of losing nothing: no duplicate or regressed row, at most one
/// unit lost per kill, and the final reconciliation misses exactly the records the per-kill
/// accounting attributed to the kills (the loss is all reported, none without a kill).
inline void check_loss_accounted(const crash_lab::policy_outcome& o, int kills) {
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  REQUIRE(o.lost_per_kill.size() == static_cast<std::size_t>(kills));
  for (std::int64_t lost : o.lost_per_kill) {
    CHECK(lost >= 0);
    CHECK(lost <= crash_batch);
  }
  CHECK(o.rows_lost ==
        std::accumulate(o.lost_per_kill.begin(), o.lost_per_kill.end(), std::int64_t{0}));
}

}  // namespace test_support
