// SPDX-License-Identifier: BSL-1.0
// The conformance kit over every SQLite sink (guarded upsert, upsert, append) with the SQLite
// position store, in the default durability mode (wal_full: what users get). The storage is on
// a RAM file system (storage.hpp): the crash matrix and the random schedules simulate process
// crashes, which keep the page cache, so the disk's fsyncs would cost time and show nothing.
// The mode's Synced claim is checked across power cuts in power_loss_conformance_test.cpp.
// Label `integration`.
#include <doctest/doctest.h>

#include <commit_order/testing/conformance.hpp>

#include "conformance/report_check.hpp"
#include "conformance/sqlite_fixture.hpp"

namespace ct = commit_order::testing;
namespace sq = commit_order::sqlite;
using conformance::sqlite_fixture;

namespace {

/// The crash matrix on a small log with a sample of batch sizes: every scenario opens two
/// databases.
ct::conformance_options options() {
  ct::conformance_options o;
  o.synced = false;  // the power_loss tier
  o.matrix_records = 10;
  o.matrix_batches = {1, 4, 10};
  o.matrix_splits = {0, 3};
  o.schedule_count = 220;  // >= 10 per legal configuration: the kit then checks it reached all
  return ct::with_environment(o);
}

template <class Mode>
commit_order::testing::report run_sqlite(const std::string& name) {
  const auto r = ct::run_conformance<sqlite_fixture<Mode>>(
      "SQLite " + name + " + SQLite position store (default mode: wal_full)", options());
  conformance::expect_passed(r);
  conformance::expect_ran(r, "Transactional: a rollback is discarded, a commit survives reopening");
  conformance::expect_ran(r,
                          "position store: nothing before the first commit, each commit survives");
  conformance::expect_ran(r, "crash matrix AtMostOnce<EveryBatch>");
  conformance::expect_ran(r, "random schedules", 220);
  return r;
}

}  // namespace

TEST_CASE("conformance: SQLite guarded upsert sink and position store") {
  const auto r = run_sqlite<sq::guarded_upsert_mode>("guarded upsert sink");
  conformance::expect_ran(r, "Idempotent: a replay rewrites its row, never adds one");
  conformance::expect_ran(r, "OffsetGuarded: an older offset never replaces a newer row");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
  conformance::expect_ran(r, "crash matrix TransactionalPosition<EveryBatch>");
}

TEST_CASE("conformance: SQLite upsert sink and position store") {
  const auto r = run_sqlite<sq::upsert_mode>("upsert sink");
  conformance::expect_ran(r, "Idempotent: a replay rewrites its row, never adds one");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
}

TEST_CASE("conformance: SQLite append sink and position store") {
  const auto r = run_sqlite<sq::append_mode>("append sink");
  CHECK(r.find("crash matrix AtLeastOnce<EveryBatch>") == nullptr);  // rule R3 refuses it
}
