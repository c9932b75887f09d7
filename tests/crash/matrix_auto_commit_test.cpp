// SPDX-License-Identifier: BSL-1.0
// AtMostOnce<AutoCommit>: a timer commits the last polled position whenever it fires, whatever
// the write did. Both directions: the timer can run ahead of the write (loss) or behind it
// (replay). The manual clock moves inside the fault injector, so the timer fires at boundaries
// that differ from one clock pattern to the next.
#include "crash/matrix.hpp"

namespace co = commit_order;

TEST_CASE("crash matrix: AtMostOnce AutoCommit") {
  crash::run_policy_matrix<co::AtMostOnce<co::AutoCommit>>();
}
