// SPDX-License-Identifier: BSL-1.0
// The conformance kit's adversarial tier over every SQLite sink: hostile values and repeated
// keys in units of every size (keyed on an integer and on a double), and two consumers with
// default options in one database. Label `integration`.
#include <doctest/doctest.h>

#include <commit_order/testing/adversarial.hpp>

#include "conformance/report_check.hpp"
#include "conformance/sqlite_hostile_fixture.hpp"

namespace ct = commit_order::testing;
namespace sq = commit_order::sqlite;
using namespace conformance;

namespace {

template <class F>
ct::report run(const std::string& name) {
  const auto r = ct::run_adversarial<F>(name);
  conformance::expect_passed(r);
  return r;
}

}  // namespace

TEST_CASE("adversarial: SQLite guarded upsert sink") {
  const auto r = run<sqlite_shared_fixture<sq::guarded_upsert_mode>>("SQLite guarded upsert");
  conformance::expect_ran(r, "apply order: any unit size leaves what one record per unit leaves",
                          30);
  conformance::expect_ran(r, "shared storage: two consumers with default options on one store", 6);
  run<sqlite_hostile_fixture<sq::guarded_upsert_mode, real_keyed_hostile<"hostile_real">>>(
      "SQLite guarded upsert, keyed on a double");
}

TEST_CASE("adversarial: SQLite upsert sink") {
  const auto r = run<sqlite_shared_fixture<sq::upsert_mode>>("SQLite upsert");
  conformance::expect_ran(r, "apply order: any unit size leaves what one record per unit leaves",
                          20);
  conformance::expect_ran(r, "shared storage: two consumers with default options on one store", 4);
  run<sqlite_hostile_fixture<sq::upsert_mode, real_keyed_hostile<"hostile_real">>>(
      "SQLite upsert, keyed on a double");
}

TEST_CASE("adversarial: SQLite append sink") {
  const auto r = run<sqlite_shared_fixture<sq::append_mode>>("SQLite append");
  conformance::expect_ran(r, "apply order: any unit size leaves what one record per unit leaves",
                          10);
  conformance::expect_ran(r, "shared storage: two consumers with default options on one store", 2);
}
