// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/report.hpp — what the conformance kit found: counts and failures, for any
// test framework to assert on.
//
// A report holds one entry per check (a capability, the crash matrix of one policy, the random
// schedules, a power-cut workload). Each entry counts the scenarios it ran and keeps the first
// failures it found, each a sentence that names the scenario (and, for a random schedule, the
// seed that reproduces it). A check that was not run says so, with the reason, in `not_run`:
// nothing is skipped without a trace.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace commit_order::testing {

/// One check of one adapter.
struct check_report {
  std::string name;
  /// Scenarios run: a behaviour probed, a crash point, a schedule, a power cut point.
  std::size_t scenarios = 0;
  /// Every failure found (only the first `kept_failures` are kept as text).
  std::size_t failure_count = 0;
  std::vector<std::string> failures;
  /// What the check measured on the way (records lost under AtMostOnce, replays absorbed, ...).
  std::vector<std::string> notes;
  /// The same figures by name, for a test to assert on: the crash matrix's "crashes",
  /// "losing", "records lost", "largest loss", "replaying", "records replayed", "absorbed",
  /// "regressions"; the random schedules' "schedules", "lives", "crashes", "record failures",
  /// "dead-lettered", "retention runs", "positions lost", "records lost", "records replayed",
  /// "configurations", "configurations reached".
  std::map<std::string, std::size_t, std::less<>> measured;

  static constexpr std::size_t kept_failures = 40;

  void fail(std::string what) {
    if (failures.size() < kept_failures)
      failures.push_back(std::move(what));
    ++failure_count;
  }
  void note(std::string what) { notes.push_back(std::move(what)); }
  [[nodiscard]] bool passed() const noexcept { return failure_count == 0; }
};

/// Everything the kit found about one adapter (one fixture).
struct report {
  std::string adapter;
  /// A deque: a check's entry stays where it is while later checks are added.
  std::deque<check_report> checks;
  /// Checks that were not run, each with its reason ("OffsetGuarded: not declared by the sink").
  std::vector<std::string> not_run;

  check_report& add(std::string name) {
    checks.push_back(check_report{std::move(name), 0, 0, {}, {}, {}});
    return checks.back();
  }

  /// Appends another report's checks (the parts of one adapter's run).
  void merge(report other) {
    for (auto& c : other.checks)
      checks.push_back(std::move(c));
    for (auto& n : other.not_run)
      not_run.push_back(std::move(n));
  }

  [[nodiscard]] std::size_t scenarios() const noexcept {
    std::size_t n = 0;
    for (const auto& c : checks)
      n += c.scenarios;
    return n;
  }
  [[nodiscard]] std::size_t failures() const noexcept {
    std::size_t n = 0;
    for (const auto& c : checks)
      n += c.failure_count;
    return n;
  }
  [[nodiscard]] bool passed() const noexcept { return failures() == 0; }

  /// The check of that name, or nullptr.
  [[nodiscard]] const check_report* find(std::string_view name) const noexcept {
    for (const auto& c : checks)
      if (c.name == name)
        return &c;
    return nullptr;
  }

  /// One line per check: its scenarios, its failures and its notes; then what was not run.
  [[nodiscard]] std::string summary() const {
    std::ostringstream out;
    out << "conformance: " << adapter << ": " << scenarios() << " scenarios in " << checks.size()
        << " checks, " << failures() << " failures\n";
    for (const auto& c : checks) {
      out << "  " << (c.passed() ? "pass" : "FAIL") << "  " << c.name << ": " << c.scenarios
          << " scenarios";
      if (!c.passed())
        out << ", " << c.failure_count << " failures";
      for (const auto& n : c.notes)
        out << "; " << n;
      out << "\n";
    }
    for (const auto& n : not_run)
      out << "  not run: " << n << "\n";
    return out.str();
  }

  /// The kept failure descriptions, each prefixed by its check ("at most `max`").
  [[nodiscard]] std::vector<std::string> failure_descriptions(std::size_t max = 50) const {
    std::vector<std::string> out;
    for (const auto& c : checks)
      for (const auto& f : c.failures) {
        if (out.size() == max)
          return out;
        out.push_back(adapter + ": " + c.name + ": " + f);
      }
    return out;
  }
};

}  // namespace commit_order::testing
