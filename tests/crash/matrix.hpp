// SPDX-License-Identifier: BSL-1.0
// The exhaustive crash matrix, as the testing kit runs it (commit_order/testing/crash_matrix.hpp)
// over the memory parts: for one policy, every legal sink x batch size x split limit (x clock
// pattern under AutoCommit), a crash at every fault point the policy's executed step list has,
// a restart with a fresh pipeline, and a comparison of what survived with the kit's reference,
// computed from the log and the step list. Over one partition, and over a consumer manually
// assigned both partitions of a 2-partition topic, where a unit may span both partitions and
// the reference keeps positions per partition.
//
// On top of the kit's own checks, the tests hold each policy to what it is known to do: it runs
// over exactly the sinks the legality table allows, and each direction its guarantee admits is
// reached, each it rules out is not.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "crash/crash_support.hpp"

namespace crash {

/// What the kit found for one policy over one fixture: its entry "crash matrix <policy>". Over a
/// transactional log the kit adds "transactional log <policy>", both readers of the log at
/// every moment the matrix read it: checked here, and printed.
template <class Policy, class F>
ct::check_report run_combination() {
  ct::report r;
  const bool ran =
      ct::run_crash_matrix_of<F, Policy>(r, matrix_options(ct::fixture_traits<F>::partitioned));
  REQUIRE(ran);
  if constexpr (ct::fixture_traits<F>::has_uncommitted_view) {
    REQUIRE(r.checks.size() == 2);
    const ct::check_report& log = r.checks.back();
    CHECK(log.name == "transactional log " + ct::detail::policy_name<Policy>());
    for (const std::string& f : log.failures)
      FAIL_CHECK(f);
    CHECK_MESSAGE(log.passed(), log.failure_count << " failed checks in " << log.name);
    CHECK(log.measured.at("aborted attempts shown") > 0);
    for (const std::string& n : log.notes)
      std::cout << "    " << log.name << ": " << n << "\n";
  } else {
    REQUIRE(r.checks.size() == 1);
  }
  return r.checks.front();
}

/// A figure of the kit's report (every figure the tests read is one the kit always measures).
inline std::size_t figure(const ct::check_report& c, const char* name) {
  const auto it = c.measured.find(name);
  REQUIRE_MESSAGE(it != c.measured.end(), "the kit measured no '" << name << "'");
  return it->second;
}

inline void print(const std::string& name, const ct::check_report& c) {
  std::cout << "  " << name << ": " << figure(c, "crashes") << " crash scenarios; lost records in "
            << figure(c, "losing") << " (" << figure(c, "records lost") << " records, at most "
            << figure(c, "largest loss") << " per crash); replayed in " << figure(c, "replaying")
            << " (" << figure(c, "records replayed") << " records, " << figure(c, "absorbed")
            << " absorbed by the guard); " << figure(c, "regressions") << " regressions seen\n";
  for (const std::string& n : c.notes)
    if (n.rfind("largest loss: ", 0) == 0)
      std::cout << "    " << n << "\n";
}

/// Runs the matrix for every sink `Policy` may legally be combined with (`Fixtures`: one
/// partition or two), checks that these are exactly the sinks the rules allow
/// (docs/legality.md), and that the failure direction the type declares is the one observed —
/// in both senses: never a direction the type rules out, and each direction it admits actually
/// reached by some crash. Returns the crash scenarios run.
template <class Policy, class Fixtures>
std::size_t run_policy_matrix_over(const std::string& where) {
  std::size_t scenarios = 0;
  std::vector<sink_kind> ran, allowed;
  std::vector<std::pair<std::string, ct::check_report>> results;
  ct::detail::for_each_type(Fixtures{}, [&]<class F>(std::type_identity<F>) {
    if (design_allows(policy_kind_of_v<Policy>, trigger_kind_of_v<Policy>, kind_of_v<F>))
      allowed.push_back(kind_of_v<F>);
    if constexpr (ct::legal_over_v<F, Policy>) {
      ran.push_back(kind_of_v<F>);
      results.emplace_back(
          ct::detail::policy_name<Policy>() + " / " + where + name_of(kind_of_v<F>),
          run_combination<Policy, F>());
    }
  });
  CHECK(ran == allowed);

  using guarantee = co::guarantee_t<Policy>;
  const std::string title =
      ct::detail::policy_name<Policy>() + (where.empty() ? "" : ", 2 partitions");
  std::cout << ct::detail::policy_name<Policy>() << " (" << guarantee::name << ")"
            << (where.empty() ? "" : ", 2 partitions") << "\n";
  for (const auto& result : results) {
    // Not a structured binding: clang 14 cannot capture one in doctest's macros.
    const std::string& name = result.first;
    const auto& c = result.second;
    print(name, c);
    scenarios += figure(c, "crashes");
    INFO(name);
    CHECK(figure(c, "crashes") > 0);
    // The declared direction is the observed one.
    CHECK((figure(c, "losing") > 0) == guarantee::may_lose);
    CHECK((figure(c, "replaying") > 0) == guarantee::may_duplicate);
    for (const std::string& f : c.failures)
      FAIL_CHECK(f);
    CHECK_MESSAGE(c.passed(), c.failure_count << " failed checks in " << name);
  }
  MESSAGE(title << ": " << scenarios << " crash scenarios over " << results.size() << " sinks");
  return scenarios;
}

/// The matrix over a single-partition log.
template <class Policy>
std::size_t run_policy_matrix() {
  return run_policy_matrix_over<Policy, all_fixtures>("");
}

/// The matrix over a consumer manually assigned both partitions of a 2-partition topic, with the
/// guarded sinks partition-scoped; the unscoped guarded ones are refused (R17: offsets of two
/// partitions are not comparable).
template <class Policy>
std::size_t run_partitioned_policy_matrix() {
  CHECK_FALSE(ct::legal_over_v<p_unscoped_guarded_fixture, Policy>);
  CHECK_FALSE(ct::legal_over_v<p_unscoped_transactional_fixture, Policy>);
  return run_policy_matrix_over<Policy, all_partitioned_fixtures>("partitioned ");
}

}  // namespace crash
