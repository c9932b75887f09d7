// SPDX-License-Identifier: BSL-1.0
// AtMostOnce: commit position, then write. A crash between the two loses the rest of the unit,
// silently, and never writes anything twice.
#include "crash/matrix.hpp"

namespace co = commit_order;

TEST_CASE("crash matrix: AtMostOnce EveryRecord") {
  crash::run_policy_matrix<co::AtMostOnce<co::EveryRecord>>();
}

TEST_CASE("crash matrix: AtMostOnce EveryBatch") {
  crash::run_policy_matrix<co::AtMostOnce<co::EveryBatch>>();
}
