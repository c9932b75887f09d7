// SPDX-License-Identifier: BSL-1.0
// TransactionalPosition: rows and position commit in one transaction. A crash anywhere leaves
// either both or neither: nothing lost, nothing written twice.
#include "crash/matrix.hpp"

namespace co = commit_order;

TEST_CASE("crash matrix: TransactionalPosition EveryRecord") {
  crash::run_policy_matrix<co::TransactionalPosition<co::EveryRecord>>();
}

TEST_CASE("crash matrix: TransactionalPosition EveryBatch") {
  crash::run_policy_matrix<co::TransactionalPosition<co::EveryBatch>>();
}
