// SPDX-License-Identifier: BSL-1.0
// AtLeastOnce: write, then commit position. A crash between the two replays the unit; the
// sink's key (or its declared harmlessness) absorbs the replay. Nothing is ever lost.
#include "crash/matrix.hpp"

namespace co = commit_order;

TEST_CASE("crash matrix: AtLeastOnce EveryRecord") {
  crash::run_policy_matrix<co::AtLeastOnce<co::EveryRecord>>();
}

TEST_CASE("crash matrix: AtLeastOnce EveryBatch") {
  crash::run_policy_matrix<co::AtLeastOnce<co::EveryBatch>>();
}

// The regression watch can see what it watches for: on a sink that upserts without the offset
// guard, a replayed older event does overwrite a newer one for a while. (That is why rule R5
// demands the guard under TransactionalPosition, and why the matrix demands zero regressions on
// every guarded sink.)
TEST_CASE("crash matrix: replays regress an unguarded upsert until they catch up") {
  const auto r =
      crash::run_combination<co::AtLeastOnce<co::EveryBatch>, crash::idempotent_fixture>();
  CHECK(r.failures.empty());
  CHECK(r.passed());
  CHECK(crash::figure(r, "regressions") > 0);
  const auto g = crash::run_combination<co::AtLeastOnce<co::EveryBatch>, crash::guarded_fixture>();
  CHECK(g.failures.empty());
  CHECK(g.passed());
  CHECK(crash::figure(g, "regressions") == 0);
  CHECK(crash::figure(g, "absorbed") == crash::figure(g, "records replayed"));
  CHECK(crash::figure(g, "absorbed") > 0);
}
