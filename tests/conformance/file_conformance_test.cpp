// SPDX-License-Identifier: BSL-1.0
// The conformance kit over the file adapter: file::log as the source (with retention) and
// file::position_store, feeding the SQLite guarded upsert sink in its default mode — every part
// Synced, as the crash lab runs them. Their Synced claims are checked across power cuts in
// power_loss_conformance_test.cpp. The storage is on a RAM file system (storage.hpp): process
// crashes keep the page cache. Label `integration`.
#include <doctest/doctest.h>

#include <commit_order/testing/conformance.hpp>

#include "conformance/file_fixture.hpp"
#include "conformance/report_check.hpp"

namespace ct = commit_order::testing;
using conformance::file_fixture;

TEST_CASE("conformance: file log and file position store") {
  ct::conformance_options o;
  o.synced = false;  // the power_loss tier
  // Every scenario writes a log and opens three files: a small log, a sample of batches.
  o.matrix_records = 10;
  o.matrix_batches = {1, 4, 10};
  o.matrix_splits = {0, 3};
  o.schedule_count = 220;  // >= 10 per legal configuration: the kit then checks it reached all
  const auto r = ct::run_conformance<file_fixture<>>(
      "file::log + file::position_store (+ SQLite guarded upsert sink, default mode)",
      ct::with_environment(o));
  conformance::expect_passed(r);
  conformance::expect_ran(r, "retention: a lagging reader gets position_lost, never a jump", 2);
  conformance::expect_ran(r,
                          "position store: nothing before the first commit, each commit survives");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
  conformance::expect_ran(r, "crash matrix AtMostOnce<EveryBatch>");
  conformance::expect_ran(r, "random schedules", 220);
}
