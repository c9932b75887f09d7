// SPDX-License-Identifier: BSL-1.0
// The conformance kit's Synced checks across simulated power cuts, over every part this project
// declares Synced in its default configuration: the file log (sync_each_append) and the file
// position store, every SQLite sink and the SQLite position store in the default mode
// (wal_full), and whole pipelines over them (AtLeastOnce, TransactionalPosition). The shim
// (tests/power_loss) is preloaded by ctest. Label `power_loss`.
//
// And one sink that lies: SQLite's old default, DELETE journal + synchronous=FULL, declared
// Synced as it was before issue 8. The kit must catch it losing an acknowledged commit.
#include <doctest/doctest.h>

#include <commit_order/testing/conformance.hpp>

#include "conformance/file_fixture.hpp"
#include "conformance/report_check.hpp"
#include "conformance/shim_power.hpp"
#include "conformance/sqlite_fixture.hpp"

namespace co = commit_order;
namespace ct = commit_order::testing;
namespace sq = commit_order::sqlite;
using conformance::shim_power;

namespace {

/// Every sync point of every workload is a cut point (none is sampled): they are few, and the
/// shim makes a sync cost nothing.
ct::conformance_options synced_only() {
  ct::conformance_options o;
  o.capabilities = false;
  o.crash_matrix = false;
  o.schedules = false;
  o.power_units = 10;
  o.power_records = 16;
  o.power_batches = {1, 3, 16};
  o.max_cut_points = 400;
  return ct::with_environment(o);
}

const std::string sink_check = "Synced sink: every acknowledged write survives a power cut";
const std::string store_check =
    "Synced position store: the last acknowledged commit survives a power cut";
const std::string source_check = "Synced source: every acknowledged append survives a power cut";

/// The guarded upsert sink in DELETE + FULL, declared Synced: the unsynced unlink of the journal
/// lets a power cut bring it back and roll an acknowledged commit back.
struct delete_full_claiming_synced final
    : sq::table_sink<conformance::kit_rows, sq::guarded_upsert_mode, sq::delete_full> {
  using table_sink::table_sink;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Synced>;
};

}  // namespace

TEST_CASE("conformance, power cuts: file log and file position store") {
  const auto r = ct::run_conformance<conformance::file_fixture<shim_power>>(
      "file::log + file::position_store (+ SQLite guarded upsert sink, default mode)",
      synced_only());
  conformance::expect_passed(r);
  conformance::expect_ran(r, source_check, 7);
  conformance::expect_ran(r, store_check, 7);
  conformance::expect_ran(r, sink_check, 7);
  conformance::expect_ran(r,
                          "power cuts in a pipeline, AtLeastOnce<EveryBatch>: no acknowledged "
                          "record lost");
  conformance::expect_ran(r,
                          "power cuts in a pipeline, TransactionalPosition<EveryBatch>: no "
                          "acknowledged record lost");
}

TEST_CASE("conformance, power cuts: SQLite guarded upsert sink and position store") {
  const auto r = ct::run_conformance<
      conformance::sqlite_fixture<sq::guarded_upsert_mode, sq::wal_full, shim_power>>(
      "SQLite guarded upsert sink + SQLite position store (default mode: wal_full)", synced_only());
  conformance::expect_passed(r);
  conformance::expect_ran(r, sink_check, 7);
  conformance::expect_ran(r, store_check, 7);
  conformance::expect_ran(r,
                          "power cuts in a pipeline, TransactionalPosition<EveryBatch>: no "
                          "acknowledged record lost");
}

TEST_CASE("conformance, power cuts: SQLite upsert sink and position store") {
  const auto r =
      ct::run_conformance<conformance::sqlite_fixture<sq::upsert_mode, sq::wal_full, shim_power>>(
          "SQLite upsert sink + SQLite position store (default mode: wal_full)", synced_only());
  conformance::expect_passed(r);
  conformance::expect_ran(r, sink_check, 7);
  conformance::expect_ran(r,
                          "power cuts in a pipeline, AtLeastOnce<EveryBatch>: no acknowledged "
                          "record lost");
}

TEST_CASE("conformance, power cuts: SQLite append sink and position store") {
  const auto r =
      ct::run_conformance<conformance::sqlite_fixture<sq::append_mode, sq::wal_full, shim_power>>(
          "SQLite append sink + SQLite position store (default mode: wal_full)", synced_only());
  conformance::expect_passed(r);
  conformance::expect_ran(r, sink_check, 7);
  conformance::expect_ran(r, store_check, 7);
}

TEST_CASE("conformance, power cuts: the kit catches DELETE + FULL declared Synced") {
  using fixture = conformance::sqlite_fixture<sq::guarded_upsert_mode, sq::delete_full, shim_power,
                                              delete_full_claiming_synced>;
  const auto r = ct::run_conformance<fixture>(
      "SQLite guarded upsert sink in DELETE + FULL, declared Synced (the old default)",
      synced_only());
  std::cout << r.summary() << std::flush;
  const auto* c = r.find(sink_check);
  REQUIRE(c != nullptr);
  CHECK(c->scenarios >= 7);
  CHECK_FALSE(c->passed());
  bool lost = false;
  for (const auto& f : c->failures)
    lost = lost || f.find("acknowledged writes were lost") != std::string::npos;
  CHECK_MESSAGE(lost, "no failure says an acknowledged write was lost");
}
