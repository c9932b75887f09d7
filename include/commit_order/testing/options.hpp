// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/options.hpp — how much of the conformance kit runs, and how hard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace commit_order::testing {

struct conformance_options {
  // ---- which checks -----------------------------------------------------------------------
  /// Idempotent, OffsetGuarded, Transactional, the position store, retention: by behaviour.
  bool capabilities = true;
  /// Every part declared Synced, across simulated power cuts (needs the fixture's power()).
  bool synced = true;
  /// Every legal policy x trigger, crashed at every fault point.
  bool crash_matrix = true;
  /// Seeded random schedules of crashes, record failures and retention.
  bool schedules = true;

  // ---- the crash matrix --------------------------------------------------------------------
  /// The log's records and keys (per partition, over a partitioned fixture).
  std::int64_t matrix_records = 12;
  std::int64_t matrix_keys = 4;
  std::vector<std::size_t> matrix_batches{1, 5, 12};
  /// settings::max_transaction_rows: 0 is none. A split at or above the batch, or under
  /// EveryRecord, cuts the same units as none and is skipped unless `redundant_splits`.
  std::vector<std::size_t> matrix_splits{0, 2};
  bool redundant_splits = false;
  /// AutoCommit: the clock moves one interval at every k-th fault point, for each k here. A
  /// replay needs a k longer than a unit's fault points (over a Transactional sink the timer
  /// fires only at step boundaries), a loss a k shorter: keep one of each.
  std::vector<std::size_t> clock_patterns{2, 5};

  // ---- random schedules --------------------------------------------------------------------
  std::size_t schedule_count = 200;
  std::uint64_t base_seed = 0xC0FFEE0DDBA11ULL;
  /// Run only the schedule with this seed (a failure prints its seed).
  std::optional<std::uint64_t> seed{};
  std::int64_t schedule_records_min = 12;
  std::int64_t schedule_records_max = 24;
  /// Keys a schedule's log spreads its records over, drawn from this range.
  std::int64_t schedule_keys_min = 2;
  std::int64_t schedule_keys_max = 5;

  // ---- power cuts ----------------------------------------------------------------------------
  /// Per workload: every sync point up to this many, above it a seeded sample (always with the
  /// first and the last).
  std::uint64_t max_cut_points = 40;
  std::uint64_t cut_sample_seed = 20240611;
  /// Units of work in the sink, store and source workloads.
  std::int64_t power_units = 6;
  /// Whole pipelines under power cuts: records and batch sizes.
  std::int64_t power_records = 10;
  std::vector<std::size_t> power_batches{1, 4};
};

/// The number in environment variable `name` (decimal, or hex with 0x), or nothing when it is
/// unset or empty.
inline std::optional<std::uint64_t> environment_number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    return std::nullopt;
  return std::strtoull(v, nullptr, 0);
}

/// Reads the environment's overrides into `o`:
///   COMMIT_ORDER_CONFORMANCE_SCHEDULES=N   run N random schedules
///   COMMIT_ORDER_CONFORMANCE_BASE_SEED=S   derive the schedules' seeds from S
///   COMMIT_ORDER_CONFORMANCE_SEED=S        run the single schedule with seed S
///   COMMIT_ORDER_CONFORMANCE_CUT_POINTS=N  try up to N cut points per power-cut workload
inline conformance_options with_environment(conformance_options o) {
  if (const auto n = environment_number("COMMIT_ORDER_CONFORMANCE_SCHEDULES"))
    o.schedule_count = static_cast<std::size_t>(*n);
  if (const auto s = environment_number("COMMIT_ORDER_CONFORMANCE_BASE_SEED"))
    o.base_seed = *s;
  if (const auto s = environment_number("COMMIT_ORDER_CONFORMANCE_SEED"))
    o.seed = *s;
  if (const auto n = environment_number("COMMIT_ORDER_CONFORMANCE_CUT_POINTS"))
    o.max_cut_points = *n;
  return o;
}

}  // namespace commit_order::testing
