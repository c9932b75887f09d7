// SPDX-License-Identifier: BSL-1.0
// The crash matrix over a manually assigned 2-partition source: every legal policy x sink, a
// crash at every fault point, positions and losses checked partition by partition.
#include "crash/matrix.hpp"

namespace co = commit_order;

TEST_CASE("partitioned crash matrix: AtMostOnce EveryRecord") {
  crash::run_partitioned_policy_matrix<co::AtMostOnce<co::EveryRecord>>();
}
TEST_CASE("partitioned crash matrix: AtMostOnce EveryBatch") {
  crash::run_partitioned_policy_matrix<co::AtMostOnce<co::EveryBatch>>();
}
TEST_CASE("partitioned crash matrix: AtMostOnce AutoCommit") {
  crash::run_partitioned_policy_matrix<co::AtMostOnce<co::AutoCommit>>();
}
TEST_CASE("partitioned crash matrix: AtLeastOnce EveryRecord") {
  crash::run_partitioned_policy_matrix<co::AtLeastOnce<co::EveryRecord>>();
}
TEST_CASE("partitioned crash matrix: AtLeastOnce EveryBatch") {
  crash::run_partitioned_policy_matrix<co::AtLeastOnce<co::EveryBatch>>();
}
TEST_CASE("partitioned crash matrix: TransactionalPosition EveryRecord") {
  crash::run_partitioned_policy_matrix<co::TransactionalPosition<co::EveryRecord>>();
}
TEST_CASE("partitioned crash matrix: TransactionalPosition EveryBatch") {
  crash::run_partitioned_policy_matrix<co::TransactionalPosition<co::EveryBatch>>();
}

TEST_CASE("partitioned crash matrix: the combinations run are the ones the rules allow") {
  std::size_t legal = 0;
  crash::ct::detail::for_each_type(
      crash::ct::detail::all_policies{}, [&]<class Policy>(std::type_identity<Policy>) {
        crash::ct::detail::for_each_type(
            crash::all_partitioned_fixtures{}, [&]<class F>(std::type_identity<F>) {
              constexpr bool by_pipeline = crash::ct::legal_over_v<F, Policy>;
              const bool by_design =
                  crash::design_allows(crash::policy_kind_of_v<Policy>,
                                       crash::trigger_kind_of_v<Policy>, crash::kind_of_v<F>);
              INFO(crash::ct::detail::policy_name<Policy>());
              CHECK(by_pipeline == by_design);
              legal += by_pipeline ? 1 : 0;
            });
      });
  // The same 25 as for one partition, with the guarded sinks partition-scoped.
  CHECK(legal == 10 + 3 + 8 + 4);
}
