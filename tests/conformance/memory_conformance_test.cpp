// SPDX-License-Identifier: BSL-1.0
// The conformance kit over the memory parts: memory::log, memory::position_store and
// memory::table in each of its capability variants. Label `integration` (the kit's tier).
#include <doctest/doctest.h>

#include <commit_order/testing/conformance.hpp>

#include "conformance/memory_fixture.hpp"
#include "conformance/report_check.hpp"

namespace co = commit_order;
namespace ct = commit_order::testing;
using conformance::memory_fixture;

namespace {

ct::conformance_options options() {
  ct::conformance_options o;
  // Memory is fast: the crash matrix's full batch and split set, and more schedules.
  o.matrix_records = 16;
  o.matrix_batches = {1, 2, 3, 7, 16};
  o.matrix_splits = {0, 2, 3};
  o.clock_patterns = {1, 2, 3, 5, 8};
  o.schedule_count = 400;
  return ct::with_environment(o);
}

}  // namespace

TEST_CASE("conformance: memory::table Idempotent") {
  const auto r = ct::run_conformance<memory_fixture<co::capabilities<co::Idempotent>>>(
      "memory::table<Idempotent>", options());
  conformance::expect_passed(r);
  conformance::expect_ran(r, "Idempotent: a replay rewrites its row, never adds one");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
  conformance::expect_ran(r, "crash matrix AtMostOnce<AutoCommit>");
  conformance::expect_ran(r, "retention: a lagging reader gets position_lost, never a jump");
}

TEST_CASE("conformance: memory::table Idempotent OffsetGuarded") {
  const auto r =
      ct::run_conformance<memory_fixture<co::capabilities<co::Idempotent, co::OffsetGuarded>>>(
          "memory::table<Idempotent, OffsetGuarded>", options());
  conformance::expect_passed(r);
  conformance::expect_ran(r, "OffsetGuarded: an older offset never replaces a newer row");
}

TEST_CASE("conformance: memory::table Idempotent OffsetGuarded Transactional") {
  const auto r = ct::run_conformance<
      memory_fixture<co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>>(
      "memory::table<Idempotent, OffsetGuarded, Transactional>", options());
  conformance::expect_passed(r);
  conformance::expect_ran(r, "Transactional: a rollback is discarded, a commit survives reopening");
  conformance::expect_ran(r, "crash matrix TransactionalPosition<EveryRecord>");
}

TEST_CASE("conformance: memory::table Idempotent Transactional") {
  const auto r =
      ct::run_conformance<memory_fixture<co::capabilities<co::Idempotent, co::Transactional>>>(
          "memory::table<Idempotent, Transactional>", options());
  conformance::expect_passed(r);
}

TEST_CASE("conformance: memory::table DuplicatesHarmless") {
  const auto r =
      ct::run_conformance<memory_fixture<co::capabilities<co::DuplicatesHarmless>, co::no_key>>(
          "memory::table<DuplicatesHarmless>", options());
  conformance::expect_passed(r);
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryRecord>");
}

TEST_CASE("conformance: memory::table plain append") {
  const auto r = ct::run_conformance<memory_fixture<co::capabilities<>, co::no_key>>(
      "memory::table<> (plain append)", options());
  conformance::expect_passed(r);
  conformance::expect_ran(r, "crash matrix AtMostOnce<EveryBatch>");
}
