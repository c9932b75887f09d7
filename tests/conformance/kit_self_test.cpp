// SPDX-License-Identifier: BSL-1.0
// The conformance kit fails adapters that break what they declare: each broken part of
// broken_parts.hpp is caught by the check that covers its promise (a kit that passed them would
// prove nothing about the adapters it passes). Label `unit`.
#include <doctest/doctest.h>

#include <string>

#include <commit_order/testing/conformance.hpp>

#include "conformance/broken_parts.hpp"

namespace co = commit_order;
namespace ct = commit_order::testing;
namespace broken = conformance::broken;
using conformance::kit_event;

namespace {

ct::conformance_options only(bool capabilities, bool synced, bool matrix, bool schedules) {
  ct::conformance_options o;
  o.capabilities = capabilities;
  o.synced = synced;
  o.crash_matrix = matrix;
  o.schedules = schedules;
  o.matrix_records = 8;
  o.matrix_batches = {1, 3};
  o.matrix_splits = {0};
  o.schedule_count = 60;
  o.max_cut_points = 20;
  return o;
}

/// The check ran (at least `min_scenarios`), and failed with a description containing `says`.
void expect_failed(const ct::report& r, const std::string& check, const std::string& says,
                   std::size_t min_scenarios = 1) {
  INFO(r.summary());
  const auto* c = r.find(check);
  REQUIRE_MESSAGE(c != nullptr, "the check '" << check << "' did not run");
  CHECK(c->scenarios >= min_scenarios);
  CHECK_FALSE(c->passed());
  bool found = false;
  for (const auto& f : c->failures)
    found = found || f.find(says) != std::string::npos;
  CHECK_MESSAGE(found, "no failure of '" << check << "' says '" << says << "'");
}

void expect_passed(const ct::report& r, const std::string& check) {
  INFO(r.summary());
  const auto* c = r.find(check);
  REQUIRE_MESSAGE(c != nullptr, "the check '" << check << "' did not run");
  CHECK(c->scenarios > 0);
  CHECK(c->passed());
}

const std::string idempotent = "Idempotent: a replay rewrites its row, never adds one";
const std::string guarded = "OffsetGuarded: an older offset never replaces a newer row";
const std::string transactional =
    "Transactional: a rollback is discarded, a commit survives reopening";
const std::string store = "position store: nothing before the first commit, each commit survives";
const std::string retention = "retention: a lagging reader gets position_lost, never a jump";

}  // namespace

TEST_CASE("the kit fails a sink that declares Idempotent and appends") {
  const auto r = ct::run_conformance<broken::fixture<broken::appending_idempotent_sink>>(
      "appending 'Idempotent' sink", only(true, false, true, true));
  expect_failed(r, idempotent, "the sink holds {key 0 @0, key 0 @0, key 1 @1, key 1 @1}");
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "rows (a duplicate row");
  expect_failed(r, "random schedules", "COMMIT_ORDER_CONFORMANCE_SEED=");
  // Not even AtMostOnce, which never replays: every record of a key adds a row.
  expect_failed(r, "crash matrix AtMostOnce<EveryBatch>", "rows (a duplicate row");
}

TEST_CASE("the kit fails a sink that declares OffsetGuarded and lets older offsets win") {
  const auto r = ct::run_conformance<broken::fixture<broken::unguarded_sink>>(
      "unguarded 'OffsetGuarded' sink", only(true, false, true, false));
  expect_failed(r, guarded, "an older offset (3 after 5) was reported applied");
  expect_failed(r, guarded, "the sink holds {key 0 @3}, expected {key 0 @5}");
  // A replay writes older rows over newer ones, which the regression watch sees.
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "went back to an older offset");
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "the offset guard absorbed 0 of");
}

TEST_CASE("the kit fails a sink that declares OffsetGuarded, reports nothing and lets older win") {
  const auto r = ct::run_conformance<broken::fixture<broken::silent_unguarded_sink>>(
      "silent unguarded 'OffsetGuarded' sink", only(true, false, true, false));
  expect_failed(r, guarded, "the sink holds {key 0 @3}, expected {key 0 @5}");
  // Without apply()'s reports there is no absorbed count to compare; the rows still show it.
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "went back to an older offset");
  const auto* c = r.find("crash matrix AtLeastOnce<EveryBatch>");
  REQUIRE(c != nullptr);
  for (const auto& f : c->failures)
    CHECK(f.find("the offset guard absorbed") == std::string::npos);
}

TEST_CASE("the kit fails a sink that declares Transactional and keeps rolled-back rows") {
  const auto r = ct::run_conformance<broken::fixture<broken::leaky_rollback_sink>>(
      "leaky rollback sink", only(true, false, true, false));
  expect_failed(r, transactional, "after the rollback: the sink holds {key 0 @0, key 1 @1}");
  expect_passed(r, idempotent);
  expect_passed(r, guarded);
  // A crash inside the transaction leaves its rows behind a position that does not cover them.
  expect_failed(r, "crash matrix TransactionalPosition<EveryBatch>",
                "after the crash and reopening: key");
}

TEST_CASE("the kit fails a position store that loses commits in a crash") {
  using fixture = broken::fixture<broken::honest_sink<co::Buffered>, broken::forgetful_store,
                                  co::memory::log<kit_event, co::Buffered>>;
  const auto r = ct::run_conformance<fixture>("forgetful store", only(true, false, true, false));
  expect_failed(r, store, "after commit(3) and reopening the store holds none");
  expect_failed(r, "crash matrix AtLeastOnce<EveryRecord>",
                "neither the crashed unit's start nor its end");
  expect_passed(r, idempotent);
}

TEST_CASE("the kit fails a source that jumps a lagging reader past deleted records") {
  using fixture =
      broken::fixture<broken::honest_sink<>, co::memory::position_store<>, broken::jumping_log>;
  const auto r = ct::run_conformance<fixture>("jumping log", only(true, false, false, false));
  expect_failed(r, retention, "(a jump over [1, ");
}

TEST_CASE("a declared Synced without a power-cut facility is a failure, never a pass") {
  using fixture =
      broken::fixture<broken::honest_sink<co::Synced>, co::memory::position_store<co::Synced>,
                      co::memory::log<kit_event, co::Synced>>;
  const auto r =
      ct::run_conformance<fixture>("Synced parts, no power", only(false, true, false, false));
  CHECK_FALSE(r.passed());
  // Nothing could run (0 scenarios), and that is reported as a failure of each part.
  expect_failed(r, "Synced sink: every acknowledged write survives a power cut",
                "no power-cut facility", 0);
  expect_failed(r, "Synced position store: every acknowledged write survives a power cut",
                "no power-cut facility", 0);
  expect_failed(r, "Synced source: every acknowledged write survives a power cut",
                "no power-cut facility", 0);
}

TEST_CASE("the power-cut check fails a store that acknowledges commits before syncing them") {
  using lazy = broken::fixture<broken::honest_sink<co::Buffered>, broken::disk_store<2>,
                               co::memory::log<kit_event, co::Buffered>>;
  using honest = broken::fixture<broken::honest_sink<co::Buffered>, broken::disk_store<1>,
                                 co::memory::log<kit_event, co::Buffered>>;
  const std::string check =
      "Synced position store: the last acknowledged commit survives a power cut";
  const auto bad = ct::run_conformance<lazy>("lazy Synced store", only(false, true, false, false));
  expect_failed(bad, check, "was acknowledged");
  const auto good =
      ct::run_conformance<honest>("honest Synced store", only(false, true, false, false));
  expect_passed(good, check);
  // Every sync point of the workload was a cut point: one commit, one sync.
  CHECK(good.find(check)->scenarios == 6 + 1);
}

TEST_CASE("a report counts scenarios and failures per check and lists what did not run") {
  ct::report r;
  r.adapter = "example";
  auto& a = r.add("a");
  a.scenarios = 3;
  auto& b = r.add("b");
  b.scenarios = 2;
  b.fail("broken");
  r.not_run.push_back("c: not declared");
  CHECK(r.scenarios() == 5);
  CHECK(r.failures() == 1);
  CHECK_FALSE(r.passed());
  CHECK(r.failure_descriptions() == std::vector<std::string>{"example: b: broken"});
  const std::string s = r.summary();
  CHECK(s.find("FAIL  b: 2 scenarios, 1 failures") != std::string::npos);
  CHECK(s.find("not run: c: not declared") != std::string::npos);
}
