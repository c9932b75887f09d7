// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/crash_matrix.hpp — the crash matrix over the real adapter.
//
// For every policy x trigger the fixture's parts make legal, every batch size and split of the
// options (and, under AutoCommit, every clock pattern):
//   1. a counting run, uncrashed, enumerates the fault points (every step boundary of every unit
//      and every row of every write) and must deliver each record exactly once and end with the
//      position at the end of the log;
//   2. for each fault point, a fresh storage runs until an injected crash there; every part is
//      closed (the process is gone) and reopened; the position read back must be where the
//      crashed unit began or ended; a fresh pipeline recovers from it and runs to the end;
//   3. the result is reconciled against the log: the sink's rows are exactly what the durable
//      writes leave (one row per key, each the row its record makes), no record is lost and no
//      row duplicated or regressed under AtLeastOnce and TransactionalPosition, nothing is
//      written twice under TransactionalPosition, and AtMostOnce loses at most the unit in
//      flight (the batch in flight under AutoCommit) — and each direction a type admits is
//      observed somewhere in the matrix, so the gaps were really reached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/errors.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/testing/detail/scenario.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/options.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing {

namespace detail {

struct matrix_totals {
  std::size_t losing = 0;
  std::size_t records_lost = 0;
  std::size_t largest_loss = 0;
  std::size_t replaying = 0;
  std::size_t records_replayed = 0;
  std::size_t absorbed = 0;
};

template <class F, class Policy>
void run_policy_matrix(check_report& c, const conformance_options& o) {
  using pf = pipeline_for<F, Policy>;
  using guarantee = guarantee_t<Policy>;
  using sink_t = typename F::sink_type;
  constexpr bool timer = pf::timer;
  constexpr bool per_record = std::is_same_v<typename Policy::trigger, EveryRecord>;
  constexpr bool guarded = has_capability_v<sink_t, OffsetGuarded>;
  // What the guard absorbed is counted from apply()'s reports. A sink that decides at commit
  // (PostgreSQL sends a unit's rows as one statement) reports nothing: its guard is held to
  // its rows instead (the regression watch, the model's offsets, the final state).
  constexpr bool reports_absorbed =
      guarded && std::is_same_v<decltype(std::declval<sink_t&>().apply(
                                    offset{}, std::declval<const sink_row_t<sink_t>&>())),
                                write_outcome>;

  const auto s = make_stream<F>(o.matrix_records, o.matrix_keys, 0);
  const std::int64_t n = s.size();
  matrix_totals t;

  std::vector<std::size_t> clock_patterns{0};
  if (timer)
    clock_patterns = o.clock_patterns;

  for (const std::size_t batch : o.matrix_batches) {
    for (const std::size_t split : o.matrix_splits) {
      if (split != 0 && (split >= batch || per_record))
        continue;  // the same units as no split
      for (const std::size_t every : clock_patterns) {
        const settings cfg{.batch_size = batch, .max_transaction_rows = split};
        const std::string config = "batch " + std::to_string(batch) +
                                   (split != 0 ? " split " + std::to_string(split) : "") +
                                   (timer ? " clock every " + std::to_string(every) : "");

        // 1. The counting run.
        std::size_t points = 0;
        {
          ++c.scenarios;
          const fail_fn fail = [&](const std::string& what) {
            c.fail(config + ", uncrashed run: " + what);
          };
          try {
            manual_clock::current = {};
            world<F> w(s);
            {
              recording_sink<sink_t> sink(w.fixture.sink(), w.j);
              auto p = w.template make<Policy, stop>(sink, cfg);
              p.faults().clock_every = every;
              p.recover();
              p.run();
              points = p.faults().seen;
            }
            for (std::int64_t off = 0; off < n; ++off)
              if (w.j.deliveries(off) != 1) {
                fail("offset " + std::to_string(off) + " was delivered " +
                     std::to_string(w.j.deliveries(off)) + " times");
                break;
              }
            if (!timer && w.template stored<Policy>() != position{n})
              fail("the stored position is not the end of the log");
            w.fixture.close();
            check_rows(w, s, "after reopening", fail);
          } catch (...) {
            fail("unexpected exception: " + describe(std::current_exception()));
          }
        }

        // 2. One crash per fault point.
        for (std::size_t at = 0; at < points; ++at) {
          ++c.scenarios;
          std::string where = config + ", crash at point " + std::to_string(at);
          const fail_fn fail = [&](const std::string& what) { c.fail(where + ": " + what); };
          try {
            manual_clock::current = {};
            world<F> w(s);
            std::optional<fault_point> crashed;
            std::int64_t unit_begin = 0, unit_end = 0, read_at_crash = 0;
            {
              recording_sink<sink_t> sink(w.fixture.sink(), w.j);
              auto p = w.template make<Policy, stop>(sink, cfg);
              p.faults().crash_at = at;
              p.faults().clock_every = every;
              p.faults().start(p.recover());
              try {
                p.run();
              } catch (const injected_crash& x) {
                crashed = x.at;
              }
              unit_begin = p.faults().unit_begin;
              unit_end = p.faults().unit_end;
              read_at_crash = p.read_position().value();
            }
            if (!crashed) {
              fail("the run ended without reaching it (the counting run saw " +
                   std::to_string(points) + " points)");
              continue;
            }
            where +=
                " (unit [" + std::to_string(unit_begin) + ", " + std::to_string(unit_end) + "))";
            // The process is gone: every part closes, and what reopens is what was durable.
            w.fixture.close();
            check_rows(w, s, "after the crash and reopening", fail);
            const std::optional<position> stored = w.template stored<Policy>();
            const std::int64_t resume = stored.value_or(position{0}).value();
            if (!timer && resume != unit_begin && resume != unit_end)
              fail("the position read back after reopening is " + std::to_string(resume) +
                   ", neither the crashed unit's start nor its end");

            {
              recording_sink<sink_t> sink(w.fixture.sink(), w.j);
              auto p = w.template make<Policy, stop>(sink, cfg);
              p.faults().clock_every = every;
              const position recovered = p.recover();
              if (recovered != position{resume})
                fail("recover() resumed at " + std::to_string(recovered.value()) +
                     ", the stored position is " + std::to_string(resume));
              p.run();
            }
            if (!timer && w.template stored<Policy>() != position{n})
              fail("the run to the end did not store the end of the log");
            w.fixture.close();
            check_rows(w, s, "after the run to the end and reopening", fail);

            // Loss and replay lie inside the unit in flight (under AutoCommit, the batch).
            // The first life starts at 0 and fails no record: its batches are fixed.
            const auto b = static_cast<std::int64_t>(batch);
            const std::int64_t batch_begin = timer ? unit_begin / b * b : unit_begin;
            const std::vector<window> windows{
                window{std::min({unit_begin, resume, batch_begin}),
                       std::max(timer ? read_at_crash : unit_end, resume)}};
            const outcome r = reconcile_deliveries<guarantee>(w, n, {}, windows, fail);
            check_final_state(w, s, true, fail);
            const std::size_t unit_size = static_cast<std::size_t>(unit_end - unit_begin);
            const std::size_t bound = timer ? batch : unit_size;
            if (r.lost > bound)
              fail("lost " + std::to_string(r.lost) + " records (" + ranges(r.lost_flags) +
                   "), more than the " + std::to_string(bound) + " of one unit");
            if constexpr (reports_absorbed) {
              if (w.j.absorbed != r.replay_deliveries)
                fail("the offset guard absorbed " + std::to_string(w.j.absorbed) + " of " +
                     std::to_string(r.replay_deliveries) + " replayed writes");
            }
            if (r.lost != 0) {
              ++t.losing;
              t.records_lost += r.lost;
              t.largest_loss = std::max(t.largest_loss, r.lost);
            }
            if (r.replayed != 0) {
              ++t.replaying;
              t.records_replayed += r.replayed;
            }
            t.absorbed += w.j.absorbed;
          } catch (...) {
            fail("unexpected exception: " + describe(std::current_exception()));
          }
        }
      }
    }
  }
  // The gaps the type admits were reached: otherwise the matrix proved nothing about them.
  if (guarantee::may_lose && t.losing == 0)
    c.fail("the policy may lose, yet no crash lost a record: the matrix never reached the gap");
  if (guarantee::may_duplicate && t.replaying == 0)
    c.fail("the policy may replay, yet no crash replayed a record: the matrix never reached it");
  c.note(std::string(guarantee::name) + ": lost records in " + std::to_string(t.losing) +
         " crashes (" + std::to_string(t.records_lost) + " records, at most " +
         std::to_string(t.largest_loss) + " per crash), replayed in " +
         std::to_string(t.replaying) + " (" + std::to_string(t.records_replayed) + " records, " +
         (guarded && !reports_absorbed ? std::string("the sink does not report absorbed writes")
                                       : std::to_string(t.absorbed) + " absorbed by the guard") +
         ")");
}

}  // namespace detail

/// Runs the crash matrix for every policy x trigger legal over fixture F's parts; one entry per
/// policy in `r`.
template <conformance_fixture F>
void run_crash_matrix(report& r, const conformance_options& o = {}) {
  detail::for_each_type(detail::all_policies{}, [&]<class P>(std::type_identity<P>) {
    if constexpr (detail::pipeline_for<F, P>::legal) {
      check_report& c = r.add("crash matrix " + detail::policy_name<P>());
      detail::run_policy_matrix<F, P>(c, o);
    } else {
      r.not_run.push_back("crash matrix " + detail::policy_name<P>() +
                          ": not legal over these parts");
    }
  });
}

}  // namespace commit_order::testing
