// SPDX-License-Identifier: BSL-1.0
// The crash matrix runs exactly the combinations the legality rules allow: every policy x
// trigger x sink is judged by `can_make_pipeline` as the testing kit builds the pipeline (with
// its fault injector, observer and recording sink) and by `is_legal_v` over the bare parts, and
// both must agree with docs/legality.md's table written out in crash_support.hpp.
#include <doctest/doctest.h>

#include <iostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "crash/crash_support.hpp"

namespace co = commit_order;
using namespace crash;

namespace {
// is_legal_v over the bare parts, with the options the policy uses (the store and the clock
// only where used).
template <class F, class Policy, class Options>
struct is_legal_with;
template <class F, class Policy, class... Options>
struct is_legal_with<F, Policy, std::tuple<Options...>> {
  static constexpr bool value =
      co::is_legal_v<typename F::source_type, typename F::sink_type, Policy, Options...>;
};
template <class F, class Policy>
constexpr bool legal_by_is_legal_v() {
  using store = typename F::store_type;
  using clock = ct::manual_clock;
  using options = std::conditional_t<
      co::policy_facts_v<Policy>.uses_position_store,
      std::conditional_t<co::policy_facts_v<Policy>.position_on_timer,
                         std::tuple<co::with_store<store>, co::with_clock<clock>>,
                         std::tuple<co::with_store<store>>>,
      std::tuple<>>;
  return is_legal_with<F, Policy, options>::value;
}
}  // namespace

TEST_CASE("crash matrix: the combinations run are the ones the rules allow") {
  std::size_t judged = 0, legal = 0;
  std::vector<std::string> mismatches;
  std::cout << "legal combinations (policy / sink):\n";
  ct::detail::for_each_type(
      ct::detail::all_policies{}, [&]<class Policy>(std::type_identity<Policy>) {
        ct::detail::for_each_type(all_fixtures{}, [&]<class F>(std::type_identity<F>) {
          ++judged;
          constexpr bool by_pipeline = ct::legal_over_v<F, Policy>;
          constexpr bool by_trait = legal_by_is_legal_v<F, Policy>();
          const bool by_design =
              design_allows(policy_kind_of_v<Policy>, trigger_kind_of_v<Policy>, kind_of_v<F>);
          static_assert(by_pipeline == by_trait, "can_make_pipeline and is_legal_v disagree");
          const std::string name =
              ct::detail::policy_name<Policy>() + " / " + name_of(kind_of_v<F>);
          if (by_pipeline != by_design)
            mismatches.push_back(name);
          if (by_pipeline) {
            ++legal;
            std::cout << "  " << name << "\n";
          }
        });
      });
  CHECK(judged == 9 * 5);
  // AtMostOnce: 5 sinks x {EveryRecord, EveryBatch} + 3 idempotent sinks under AutoCommit;
  // AtLeastOnce: the 4 that absorb or tolerate a replay x 2 (R3 refuses the log);
  // TransactionalPosition: the guarded transactional sink and the append-only log x 2 (R5 asks
  // a guard of an upsert only).
  CHECK(legal == 10 + 3 + 8 + 4);
  for (const std::string& m : mismatches)
    FAIL_CHECK("the rules and docs/legality.md disagree on " << m);
  MESSAGE(legal << " of " << judged << " policy x trigger x sink combinations are legal");
}
