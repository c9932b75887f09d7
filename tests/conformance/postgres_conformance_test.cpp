// SPDX-License-Identifier: BSL-1.0
// The conformance kit over every PostgreSQL sink (guarded upsert, version-guarded, upsert,
// append) with the PostgreSQL position store, against the fsync=off server the CTest fixture
// `postgres` starts (labels `postgres` and `integration`; the target is defined in
// tests/postgres/CMakeLists.txt, which owns that fixture).
//
// The crash matrix and the random schedules simulate crashes of the consumer's process: the
// fixture closes its connections as a kill does, and the server keeps what it committed. Synced
// is not checked here: the kit's power cuts come from an LD_PRELOAD shim that follows one
// process's syncs, and a PostgreSQL server is several processes of its own. PostgreSQL's Synced
// rests on the server's settings, read at every connect (fsync, full_page_writes,
// synchronous_commit; tests/postgres/postgres_sink_test.cpp), and on the tests that crash the
// server itself (pg_ctl stop -m immediate, tests/postgres/postgres_pipeline_test.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include <commit_order/testing/conformance.hpp>

#include "conformance/postgres_fixture.hpp"
#include "conformance/report_check.hpp"

namespace ct = commit_order::testing;
using conformance::postgres_fixture;

namespace {

/// Smaller than the SQLite run's matrix (10 records, batches 1, 4 and 10): a scenario here
/// costs ~30 ms, most of it connections (the server counts ~4.7 sessions a scenario, ~5 ms each
/// on a loaded machine), and the four runs must fit the PostgreSQL tier's few minutes. Batch 2
/// gives many multi-row units; batch 8 is one unit over 4 keys, so keys repeat in it and the
/// sink sends one row per key; split 3 cuts it into transactions of three rows. Single-row
/// units are the EveryRecord policies'. `schedules`: 10 per legal configuration, the least at
/// which the kit checks that it reached every one.
ct::conformance_options options(std::size_t schedules) {
  ct::conformance_options o;
  o.synced = false;  // see above: no power cut reaches the server
  o.matrix_records = 8;
  o.matrix_batches = {2, 8};
  o.matrix_splits = {0, 3};
  o.schedule_count = schedules;
  return ct::with_environment(o);
}

template <class Sink>
ct::report run_postgres(const std::string& name, std::size_t schedules) {
  const auto r = ct::run_conformance<postgres_fixture<Sink>>(
      "PostgreSQL " + name + " + PostgreSQL position store (buffered: the fsync=off server)",
      options(schedules));
  conformance::expect_passed(r);
  // The Synced check is listed as not run, with its reason: never read as a pass.
  CHECK_MESSAGE(std::any_of(r.not_run.begin(), r.not_run.end(),
                            [](const std::string& n) {
                              return n == "Synced across power cuts: not selected in this run";
                            }),
                r.adapter << ": the report does not list the Synced check as not run");
  conformance::expect_ran(r,
                          "position store: nothing before the first commit, each commit survives");
  conformance::expect_ran(r, "Transactional: a rollback is discarded, a commit survives reopening");
  conformance::expect_ran(r, "crash matrix AtMostOnce<EveryBatch>");
  conformance::expect_ran(r, "random schedules", schedules);
  return r;
}

}  // namespace

TEST_CASE("conformance: PostgreSQL guarded upsert sink and position store") {
  const auto r = run_postgres<conformance::pg_guarded_sink<>>("guarded upsert sink", 210);
  conformance::expect_ran(r, "Idempotent: a replay rewrites its row, never adds one");
  conformance::expect_ran(r, "OffsetGuarded: an older offset never replaces a newer row");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
  conformance::expect_ran(r, "crash matrix TransactionalPosition<EveryBatch>");
}

TEST_CASE("conformance: PostgreSQL version-guarded sink and position store") {
  const auto r = run_postgres<conformance::pg_version_sink<>>("version-guarded sink (on seq)", 210);
  conformance::expect_ran(r, "Idempotent: a replay rewrites its row, never adds one");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
  conformance::expect_ran(r, "crash matrix TransactionalPosition<EveryBatch>");
}

TEST_CASE("conformance: PostgreSQL upsert sink and position store") {
  const auto r = run_postgres<conformance::pg_upsert_sink<>>("upsert sink", 150);
  conformance::expect_ran(r, "Idempotent: a replay rewrites its row, never adds one");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
  CHECK(r.find("crash matrix TransactionalPosition<EveryBatch>") == nullptr);  // rule R5
}

TEST_CASE("conformance: PostgreSQL append sink and position store") {
  const auto r = run_postgres<conformance::pg_append_sink<>>("append sink", 60);
  CHECK(r.find("crash matrix AtLeastOnce<EveryBatch>") == nullptr);  // rule R3 refuses it
}
