// SPDX-License-Identifier: BSL-1.0
// The crash matrix runs exactly the combinations the legality rules allow: every policy x
// trigger x sink is judged by `can_make_pipeline` (with the options the matrix uses) and by
// `is_legal_v`, and both must agree with docs/legality.md's table written out in crash_support.hpp.
#include <doctest/doctest.h>

#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "crash/crash_support.hpp"

namespace co = commit_order;
using namespace crash;

namespace {
// is_legal_v over the same options the matrix's pipeline gets (store and clock only where used).
template <class Policy, class Table, class Options>
struct is_legal_with;
template <class Policy, class Table, class... Options>
struct is_legal_with<Policy, Table, std::tuple<Options...>> {
  static constexpr bool value = co::is_legal_v<event_log, journal_sink<Table>, Policy, Options...>;
};
template <class Policy, class Table>
constexpr bool legal_by_is_legal_v() {
  using options = std::conditional_t<
      co::policy_facts_v<Policy>.uses_position_store,
      std::conditional_t<co::policy_facts_v<Policy>.position_on_timer,
                         std::tuple<co::with_store<store>, co::with_clock<manual_clock>>,
                         std::tuple<co::with_store<store>>>,
      std::tuple<>>;
  return is_legal_with<Policy, Table, options>::value;
}
}  // namespace

TEST_CASE("crash matrix: the combinations run are the ones the rules allow") {
  std::size_t judged = 0, legal = 0;
  std::vector<std::string> mismatches;
  std::cout << "legal combinations (policy / sink):\n";
  for_each_type(all_policies{}, [&]<class Policy>(std::type_identity<Policy>) {
    for_each_type(all_tables{}, [&]<class Table>(std::type_identity<Table>) {
      ++judged;
      constexpr bool by_pipeline =
          legal_v<Policy, journal_sink<Table>, co::with_faults<scenario_faults>,
                  co::with_clock<manual_clock>, co::with_observer<co::counting_observer>>;
      constexpr bool by_trait = legal_by_is_legal_v<Policy, Table>();
      const bool by_design =
          design_allows(policy_kind_of_v<Policy>, trigger_kind_of_v<Policy>, kind_of_v<Table>);
      static_assert(by_pipeline == by_trait, "can_make_pipeline and is_legal_v disagree");
      if (by_pipeline != by_design)
        mismatches.push_back(policy_name<Policy>() + " / " + name_of(kind_of_v<Table>));
      if (by_pipeline) {
        ++legal;
        std::cout << "  " << policy_name<Policy>() << " / " << name_of(kind_of_v<Table>) << "\n";
      }
    });
  });
  CHECK(judged == 9 * 4);
  // AtMostOnce: 4 sinks x {EveryRecord, EveryBatch} + 3 idempotent sinks under AutoCommit;
  // AtLeastOnce: 4 x 2; TransactionalPosition: the transactional sink x 2.
  CHECK(legal == 8 + 3 + 8 + 2);
  for (const std::string& m : mismatches)
    FAIL_CHECK("the rules and docs/legality.md disagree on " << m);
  MESSAGE(legal << " of " << judged << " policy x trigger x sink combinations are legal");
}
