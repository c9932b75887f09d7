// SPDX-License-Identifier: BSL-1.0
// How the conformance tests here assert on a kit report: print the summary (its counts are
// quoted in docs/testing-kit.md), fail with each kept failure description, and check that the
// report ran what the test meant it to run.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <iostream>
#include <string>

#include <commit_order/testing/report.hpp>

namespace conformance {

inline void expect_passed(const commit_order::testing::report& r) {
  std::cout << r.summary() << std::flush;
  for (const auto& f : r.failure_descriptions(30))
    FAIL_CHECK(f);
  CHECK_MESSAGE(r.passed(), r.failures() << " failures in " << r.adapter);
  CHECK(r.scenarios() > 0);
}

/// The check named `name` ran at least `min` scenarios.
inline void expect_ran(const commit_order::testing::report& r, const std::string& name,
                       std::size_t min = 1) {
  const auto* c = r.find(name);
  CHECK_MESSAGE(c != nullptr, r.adapter << ": the check '" << name << "' did not run");
  if (c != nullptr)
    CHECK_MESSAGE(c->scenarios >= min, r.adapter << ": '" << name << "' ran " << c->scenarios
                                                 << " scenarios, expected at least " << min);
}

}  // namespace conformance
