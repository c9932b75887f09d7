// SPDX-License-Identifier: BSL-1.0
// Runs one workload under a power cut at each of its sync points, and tallies what survived.
//
//   1. The workload runs once with the power on to the end: its sync points are counted (S),
//      and the power is cut after it returned (the last cut point: everything acknowledged).
//   2. It runs again from the same starting state for each cut point 1..S (every one, or a
//      seeded sample when S is above `max_cut_points`), with the power going out at that sync.
//   3. After each run the durable image is materialised and `check` recovers from it and
//      compares it with what the run acknowledged before the cut.
//
// The starting state (`prepare`) is durable: the shim watches the root only once it is built.
// The workload must stop once the power is out (it checks power_is_out() after each
// operation) and close every file; what it returns is what was acknowledged before the cut.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "power_loss/power_cut.hpp"

namespace power_loss {

/// What one recovery found.
struct findings {
  /// Acknowledged items (records, commits, positions) the recovered state does not have. For a
  /// part declared Synced this must be 0.
  std::int64_t lost = 0;
  /// Anything that is not a legal state after a power cut: a file that does not reopen, a
  /// record that is not what was written, a half transaction, a duplicate. Must stay empty.
  std::vector<std::string> problems;
  /// Unacknowledged work that did not survive (allowed; reported).
  std::int64_t unacknowledged_lost = 0;
  /// What else the recovery saw, by name (summed over the cut points and printed).
  std::map<std::string, std::int64_t> counts;
};

/// The sum over every cut point of one workload.
struct tally {
  std::string name;
  std::string lost_label = "acknowledged items lost";
  std::uint64_t syncs = 0;        ///< sync points in one uninterrupted run
  std::uint64_t cut_points = 0;   ///< cut points tried (sampled ones and the one after the end)
  std::uint64_t recoveries = 0;   ///< cut points x tail modes
  std::int64_t lost = 0;          ///< acknowledged items lost, over every recovery
  std::uint64_t cuts_losing = 0;  ///< recoveries that lost acknowledged items
  std::int64_t unacknowledged_lost = 0;
  std::uint64_t problem_count = 0;
  std::vector<std::string> first_problems;  ///< the first few, with their cut point
  std::string first_loss;                   ///< where the first acknowledged loss happened
  std::map<std::string, std::int64_t> counts;

  [[nodiscard]] std::int64_t count(const std::string& what) const {
    const auto it = counts.find(what);
    return it == counts.end() ? 0 : it->second;
  }

  [[nodiscard]] std::string summary() const {
    std::ostringstream out;
    out << "power_loss: " << name << ": " << cut_points << " cut points of " << syncs
        << " sync points, " << recoveries << " recoveries, " << lost << " " << lost_label << " (in "
        << cuts_losing << " recoveries), " << unacknowledged_lost << " unacknowledged lost, "
        << problem_count << " problems";
    for (const auto& [what, n] : counts)
      out << ", " << what << ": " << n;
    if (!first_loss.empty())
      out << "\n  first loss: " << first_loss;
    for (const auto& p : first_problems)
      out << "\n  problem: " << p;
    return out.str();
  }
};

struct cut_options {
  /// What `lost` counts, for the summary ("acknowledged records lost", ...).
  std::string lost_label = "acknowledged items lost";
  /// Above this many sync points, a seeded sample of cut points is tried instead of all of them
  /// (always including the first and the last). COMMIT_ORDER_POWER_CUT_ALL=1 tries all.
  std::uint64_t max_cut_points = 400;
  std::uint64_t sample_seed = 20240611;
  /// 0: the model (only synced bytes survive). Non-zero: also a torn append of unsynced bytes,
  /// seeded per cut point. Each mode is one recovery per cut point.
  std::vector<std::uint64_t> tail_seeds{0};
};

/// Cut points 1..syncs to try: all of them, or a sample.
inline std::vector<std::uint64_t> choose_cut_points(std::uint64_t syncs, const cut_options& o) {
  std::vector<std::uint64_t> points;
  const char* all = std::getenv("COMMIT_ORDER_POWER_CUT_ALL");
  const bool every = (all != nullptr && std::string(all) == "1") || syncs <= o.max_cut_points;
  if (every) {
    for (std::uint64_t p = 1; p <= syncs; ++p)
      points.push_back(p);
    return points;
  }
  std::mt19937_64 rng(o.sample_seed);
  std::vector<std::uint64_t> candidates;
  for (std::uint64_t p = 2; p < syncs; ++p)
    candidates.push_back(p);
  std::shuffle(candidates.begin(), candidates.end(), rng);
  candidates.resize(o.max_cut_points - 2);
  points = {1, syncs};
  points.insert(points.end(), candidates.begin(), candidates.end());
  std::sort(points.begin(), points.end());
  return points;
}

namespace detail {
inline void fresh_root(const std::filesystem::path& root) {
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
}

inline void add(tally& t, const findings& f, const std::string& where) {
  ++t.recoveries;
  t.lost += f.lost;
  t.unacknowledged_lost += f.unacknowledged_lost;
  if (f.lost > 0) {
    ++t.cuts_losing;
    if (t.first_loss.empty())
      t.first_loss = where + ": " + std::to_string(f.lost) + " lost";
  }
  for (const auto& [what, n] : f.counts)
    t.counts[what] += n;
  t.problem_count += f.problems.size();
  for (const auto& p : f.problems)
    if (t.first_problems.size() < 5)
      t.first_problems.push_back(where + ": " + p);
}
}  // namespace detail

/// prepare(root) builds the starting state; run(root) -> Ack runs the workload until it ends or
/// the power goes out; check(root, ack) -> findings recovers from the materialised image.
template <class Prepare, class Run, class Check>
tally run_cut_points(std::string name, const std::filesystem::path& root, Prepare prepare, Run run,
                     Check check, const cut_options& options = {}) {
  shim& power = shim::get();
  tally t;
  t.name = std::move(name);
  t.lost_label = options.lost_label;

  const auto one = [&](std::uint64_t cut_at, std::uint64_t tail_seed, const std::string& where) {
    detail::fresh_root(root);
    prepare(root);
    power.watch(root);
    power.arm(cut_at);
    findings f;
    try {
      auto ack = run(root);
      if (cut_at != 0 && !power.cut())
        f.problems.push_back("the run ended before its sync point " + std::to_string(cut_at) +
                             " (the workload is not deterministic)");
      if (cut_at == 0)
        t.syncs = power.syncs();
      power.materialise(tail_seed);
      try {
        f = check(root, ack);
      } catch (const std::exception& e) {
        f.problems.push_back(std::string("recovery failed: ") + e.what());
      }
    } catch (const std::exception& e) {
      f.problems.push_back(std::string("the run failed: ") + e.what());
    }
    detail::add(t, f, where);
  };

  // The uninterrupted run counts the sync points; its cut falls after the last one returned.
  for (std::uint64_t seed : options.tail_seeds)
    one(0, seed, "cut after the end" + std::string(seed != 0 ? " (torn tail)" : ""));
  ++t.cut_points;
  for (std::uint64_t point : choose_cut_points(t.syncs, options)) {
    ++t.cut_points;
    for (std::uint64_t seed : options.tail_seeds) {
      const std::uint64_t tail = seed == 0 ? 0 : seed * 1000003U + point;
      one(point, tail, "cut at sync " + std::to_string(point) + (seed != 0 ? " (torn tail)" : ""));
    }
  }
  // Printed whether the test passes or fails: the counts are quoted in docs/failure-directions.md.
  std::cout << t.summary() << std::endl;
  return t;
}

}  // namespace power_loss
