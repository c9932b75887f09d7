// SPDX-License-Identifier: BSL-1.0
// The conformance kit's adversarial tier over every PostgreSQL sink with the PostgreSQL position
// store: hostile values and repeated keys in units of every size (keyed on an integer and on a
// double), and two consumers with default options in one schema. Label `postgres`.
#include <doctest/doctest.h>

#include <commit_order/testing/adversarial.hpp>

#include "conformance/postgres_hostile_fixture.hpp"
#include "conformance/report_check.hpp"

namespace ct = commit_order::testing;
using namespace conformance;

namespace {

constexpr const char* apply_order =
    "apply order: any unit size leaves what one record per unit leaves";
constexpr const char* shared = "shared storage: two consumers with default options on one store";

template <class F>
ct::report run(const std::string& name) {
  const auto r = ct::run_adversarial<F>(name);
  conformance::expect_passed(r);
  return r;
}

}  // namespace

TEST_CASE("adversarial: PostgreSQL guarded upsert sink") {
  const auto r = run<postgres_shared_fixture<pg_guarded_t>>("PostgreSQL guarded upsert");
  conformance::expect_ran(r, apply_order, 30);
  conformance::expect_ran(r, shared, 6);
  run<postgres_hostile_fixture<pg_guarded_t, pg_real_keyed_hostile<"hostile_real">>>(
      "PostgreSQL guarded upsert, keyed on a double");
}

TEST_CASE("adversarial: PostgreSQL upsert sink") {
  const auto r = run<postgres_shared_fixture<pg_upsert_t>>("PostgreSQL upsert");
  conformance::expect_ran(r, apply_order, 20);
  conformance::expect_ran(r, shared, 4);
  run<postgres_hostile_fixture<pg_upsert_t, pg_real_keyed_hostile<"hostile_real">>>(
      "PostgreSQL upsert, keyed on a double");
}

TEST_CASE("adversarial: PostgreSQL append sink") {
  const auto r = run<postgres_shared_fixture<pg_append_t>>("PostgreSQL append");
  conformance::expect_ran(r, apply_order, 10);
  conformance::expect_ran(r, shared, 2);
}
