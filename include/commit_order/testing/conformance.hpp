// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/conformance.hpp — one conformance kit for every adapter
// (docs/testing-kit.md).
//
//   #include <commit_order/testing/conformance.hpp>
//
//   auto r = commit_order::testing::run_conformance<my_fixture>("my adapter");
//   CHECK(r.passed());            // any test framework: the kit returns a report, never asserts
//   std::cout << r.summary();     // scenarios and failures per check
//
// The fixture (fixture.hpp) builds the adapter's source, sink and position store over storage of
// its own. The kit then
//   1. checks each declared capability by behaviour (capability_checks.hpp), and Synced across
//      simulated power cuts (power_checks.hpp);
//   2. runs the crash matrix over the real adapter: every legal policy x trigger, crashed at
//      every fault point, reopened and recovered, reconciled against the log and against what
//      the policy's step list says each crash leaves (crash_matrix.hpp), over one partition or
//      several;
//   3. runs seeded random schedules of crashes, failed records and retention (schedules.hpp);
//   4. reports, per check, the scenarios it ran and what it found (report.hpp).
// Header-only, and independent of any test framework. docs/testing-kit.md tells how to write a
// fixture and what each check proves.
#pragma once

#include <string>
#include <utility>

#include "commit_order/testing/capability_checks.hpp"
#include "commit_order/testing/crash_matrix.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/options.hpp"
#include "commit_order/testing/power_checks.hpp"
#include "commit_order/testing/recording_sink.hpp"
#include "commit_order/testing/report.hpp"
#include "commit_order/testing/schedules.hpp"

namespace commit_order::testing {

/// Runs the checks `o` selects over fixture F and returns what they found. A check that is not
/// selected is listed in the report's `not_run`, so a partial run never reads as a full pass.
template <class F>
report run_conformance(std::string adapter, const conformance_options& o = {}) {
  static_assert(conformance_fixture<F>,
                "commit_order::testing: the fixture lacks a member the kit needs -- see "
                "commit_order/testing/fixture.hpp for event_type, source_type, sink_type, "
                "make_event, create_log, source, sink, close and rows");
  report r;
  r.adapter = std::move(adapter);
  if constexpr (single_partition_fixture<F>) {
    if (o.capabilities)
      check_capabilities<F>(r, o);
    else
      r.not_run.push_back("capability checks: not selected");
    if (o.synced)
      check_synced<F>(r, o);
    else
      r.not_run.push_back("Synced across power cuts: not selected in this run");
  } else {
    r.not_run.push_back("capability checks: single-partition, and the fixture is partitioned");
    r.not_run.push_back(
        "Synced across power cuts: single-partition, and the fixture is "
        "partitioned");
  }
  if (o.crash_matrix)
    run_crash_matrix<F>(r, o);
  else
    r.not_run.push_back("crash matrix: not selected");
  if constexpr (single_partition_fixture<F>) {
    if (o.schedules)
      run_random_schedules<F>(r, o);
    else
      r.not_run.push_back("random schedules: not selected");
  } else {
    r.not_run.push_back("random schedules: single-partition, and the fixture is partitioned");
  }
  return r;
}

}  // namespace commit_order::testing
