// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/crash_matrix.hpp — the crash matrix over the real adapter.
//
// For every policy x trigger the fixture's parts make legal, every batch size and split of the
// options (and, under AutoCommit, every clock pattern):
//   1. a counting run, uncrashed, writes down the fault points (every step boundary of every
//      unit and every row of every write), the batches the source handed out and the order the
//      records were written in. It must deliver each record exactly once, write each
//      partition's records in offset order, end with the position at the end of the log, and
//      stop at exactly the fault points a reference predicts: the policy's own executed step
//      list (`effective_steps_t`), over the units the batches cut into at the transaction
//      limit (the split, the sink's declared and run-time limits; one record under
//      EveryRecord);
//   2. for each fault point, a fresh storage runs until an injected crash there; every part is
//      closed (the process is gone) and reopened. Where the write and the position become
//      durable in the step list decides what the crash must have left: which records were
//      written durably (none of a unit inside a transaction, row by row outside one), and where
//      the position read back stands, partition by partition (the crashed unit's start or end;
//      under AutoCommit a position some poll up to the batch in flight returned). A fresh
//      pipeline must recover exactly there and run to the end;
//   3. the result is reconciled against the log and that reference: the sink's rows are
//      exactly what the durable writes leave (one row per key, each the row its record makes),
//      the records lost are exactly [written, resumed) and the records written twice exactly
//      [resumed, written) of each partition, none more than twice; no record is lost under
//      AtLeastOnce and TransactionalPosition and none written twice under
//      TransactionalPosition; AtMostOnce loses at most the unit in flight (the batch in flight
//      under AutoCommit); an offset-guarded row never goes back, even for a moment, and every
//      replay is absorbed by the guard (as the sink reports, and as the pipeline's observer
//      hears) — and each direction a type admits is observed somewhere in the matrix, so the
//      gaps were really reached.
// A fixture over several partitions (fixture.hpp) runs the same matrix over every partition.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/detail/loop/parts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/testing/detail/log_views.hpp"
#include "commit_order/testing/detail/scenario.hpp"
#include "commit_order/testing/detail/step_model.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/options.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing {

namespace detail {

struct matrix_totals {
  std::size_t crashes = 0;
  std::size_t losing = 0;
  std::size_t records_lost = 0;
  std::size_t largest_loss = 0;
  std::string largest_loss_example;
  std::size_t replaying = 0;
  std::size_t records_replayed = 0;
  std::size_t absorbed = 0;
  std::size_t regressions = 0;
  std::size_t short_polls = 0;
};

/// One unit of work of the reference: its records, in the order the counting run wrote them,
/// and the batch they came from.
struct unit_ref {
  std::vector<std::int64_t> records;
  std::size_t batch = 0;
};

/// What a counting run showed, cut into the reference: the batches (the records each poll
/// returned, in the order they were written) and the units the transaction limit cuts them
/// into.
struct matrix_reference {
  std::vector<std::vector<std::int64_t>> batches;
  std::vector<unit_ref> units;
  std::vector<point_ref> points;
  /// After each batch, where each partition's read position stands (what a timer may commit).
  std::vector<std::vector<std::int64_t>> read_after;
};

/// The largest unit the pipeline may cut: the split, the sink's declared limit and its run-time
/// one, whichever is lowest (1 under EveryRecord).
template <class Sink, class Policy>
std::size_t unit_limit(Sink& sink, std::size_t split) {
  if constexpr (std::is_same_v<typename Policy::trigger, EveryRecord>) {
    return 1;
  } else {
    std::size_t limit = std::numeric_limits<std::size_t>::max();
    if constexpr (max_transaction_rows_v<Sink> != 0)
      limit = max_transaction_rows_v<Sink>;
    if (split != 0)
      limit = std::min(limit, split);
    if constexpr (runtime_limited_sink<Sink>) {
      const auto n = static_cast<std::size_t>(sink.max_transaction_rows());
      if (n != 0)
        limit = std::min(limit, n);
    }
    return limit;
  }
}

/// The reference of a counting run: its polls cut the records in the order they were written
/// into batches, and `limit` cuts the batches into units. Checks what the run must have done
/// on the way: polled each record once, never more than `batch` at a time, and written each
/// partition's records in offset order. Returns nothing when the run cannot be cut (a failure).
template <class Event>
std::optional<matrix_reference> cut_reference(const stream<Event>& s,
                                              const std::vector<std::size_t>& polls,
                                              const std::vector<std::int64_t>& written,
                                              std::size_t batch, std::size_t limit,
                                              const step_model& model, matrix_totals& t,
                                              const fail_fn& fail) {
  std::size_t polled = 0;
  for (std::size_t b = 0; b < polls.size(); ++b) {
    polled += polls[b];
    if (polls[b] > batch)
      fail("poll " + std::to_string(b) + " returned " + std::to_string(polls[b]) +
           " records, more than the batch size " + std::to_string(batch));
    if (polls[b] < batch && b + 1 < polls.size())
      ++t.short_polls;  // fewer than asked, and not the last: the source's choice
  }
  const auto n = static_cast<std::size_t>(s.size());
  if (polled != n || written.size() != n) {
    fail("the polls returned " + std::to_string(polled) + " records and the sink was written " +
         std::to_string(written.size()) + " times, the log has " + std::to_string(n) + " records");
    return std::nullopt;
  }
  std::vector<std::int64_t> next(s.partitions(), 0);
  for (const std::int64_t i : written) {
    const auto k = static_cast<std::size_t>(s.partition_of(i).value());
    if (s.offset_of(i).value() != next[k]) {
      fail("the uncrashed run wrote " + s.name(i) + " where the partition's next record is " +
           std::to_string(next[k]));
      return std::nullopt;
    }
    ++next[k];
  }
  matrix_reference ref;
  std::vector<std::int64_t> read(s.partitions(), 0);
  std::size_t at = 0;
  for (std::size_t b = 0; b < polls.size(); ++b) {
    std::vector<std::int64_t>& records = ref.batches.emplace_back();
    records.assign(written.begin() + static_cast<std::ptrdiff_t>(at),
                   written.begin() + static_cast<std::ptrdiff_t>(at + polls[b]));
    at += polls[b];
    for (std::size_t done = 0; done < records.size(); done += limit) {
      const std::size_t last = std::min(records.size(), done + limit);
      ref.units.push_back(unit_ref{{records.begin() + static_cast<std::ptrdiff_t>(done),
                                    records.begin() + static_cast<std::ptrdiff_t>(last)},
                                   b});
    }
    for (const std::int64_t i : records)
      read[static_cast<std::size_t>(s.partition_of(i).value())] = s.offset_of(i).value() + 1;
    ref.read_after.push_back(read);
  }
  std::vector<std::size_t> sizes;
  for (const unit_ref& u : ref.units)
    sizes.push_back(u.records.size());
  ref.points = reference_points(model, sizes);
  return ref;
}

/// The position a unit's fault points carry: after its last record.
template <class Event>
position unit_end_of(const stream<Event>& s, const unit_ref& u) {
  return position::after(s.offset_of(u.records.back()));
}

/// The matrix of one policy into `c`, and, over a fixture with both views of a transactional
/// log, its transactional-log section into `log`.
template <class F, class Policy>
void run_policy_matrix(check_report& c, const conformance_options& o, check_report* log = nullptr) {
  using traits = fixture_traits<F>;
  using pf = pipeline_for<F, Policy>;
  using guarantee = guarantee_t<Policy>;
  using sink_t = typename F::sink_type;
  constexpr bool timer = pf::timer;
  constexpr bool per_record = std::is_same_v<typename Policy::trigger, EveryRecord>;
  constexpr bool guarded = has_capability_v<sink_t, OffsetGuarded>;
  // What the guard absorbed is counted from apply()'s reports. A sink that decides at commit
  // (PostgreSQL sends a unit's rows as one statement) reports nothing: its guard is held to
  // its rows instead (the regression watch, the model's offsets, the final state).
  constexpr bool reports_absorbed = [] {
    if constexpr (!guarded) {
      return false;
    } else if constexpr (traits::partitioned) {
      return std::is_same_v<decltype(std::declval<sink_t&>().apply(
                                partition_id{}, offset{},
                                std::declval<const sink_row_t<sink_t>&>())),
                            write_outcome>;
    } else {
      return std::is_same_v<decltype(commit_order::detail::sink_part<false, sink_t>::apply(
                                std::declval<sink_t&>(), partition_id{}, offset{},
                                std::declval<const sink_row_t<sink_t>&>())),
                            write_outcome>;
    }
  }();
  const step_model model =
      model_of(effective_steps_t<Policy>::kinds, has_capability_v<sink_t, Transactional>);

  const auto s = traits::partitioned
                     ? make_stream<F>(traits::partitions, o.matrix_records, o.matrix_keys, 0)
                     : make_stream<F>(o.matrix_records, o.matrix_keys, 0);
  const std::int64_t n = s.size();
  const std::size_t parts = s.partitions();
  auto partition = [](std::size_t k) { return partition_id{static_cast<std::int32_t>(k)}; };
  // " of partition 1" over several partitions, nothing over one.
  auto of_partition = [parts](std::size_t k) {
    return parts == 1 ? std::string() : " of partition " + std::to_string(k);
  };
  matrix_totals t;
  // The transactional-log section: both readers of the log, at every moment the rows are read.
  constexpr bool views = traits::has_uncommitted_view;
  log_totals lt;
  auto log_views = [&](world<F>& w, const std::string& scenario, const std::string& when,
                       const std::vector<bool>& may_abort) -> std::size_t {
    if constexpr (views) {
      if (log == nullptr)
        return 0;
      const fail_fn fail = [&](const std::string& what) { log->fail(scenario + ": " + what); };
      try {
        return check_log_views(w, s, when, !guarantee::may_duplicate, may_abort, lt, fail);
      } catch (...) {
        fail(when + ": reading the log's two views: " + describe(std::current_exception()));
        return 0;
      }
    } else {
      return 0;
    }
  };

  std::vector<std::size_t> clock_patterns{0};
  if (timer)
    clock_patterns = o.clock_patterns;

  for (const std::size_t batch : o.matrix_batches) {
    for (const std::size_t split : o.matrix_splits) {
      if (!o.redundant_splits && split != 0 && (split >= batch || per_record))
        continue;  // the same units as no split
      for (const std::size_t every : clock_patterns) {
        const settings cfg{.batch_size = batch, .max_transaction_rows = split};
        const std::string config = "batch " + std::to_string(batch) +
                                   (split != 0 ? " split " + std::to_string(split) : "") +
                                   (timer ? " clock every " + std::to_string(every) : "");

        // 1. The counting run.
        std::optional<matrix_reference> ref;
        {
          ++c.scenarios;
          const fail_fn fail = [&](const std::string& what) {
            c.fail(config + ", uncrashed run: " + what);
          };
          try {
            manual_clock::current = {};
            world<F> w(s);
            std::vector<fault_point> trace;
            std::vector<std::size_t> polls;
            std::vector<std::int64_t> written;
            std::size_t limit = 0;
            w.j.on_applied = [&written](std::int64_t i) { written.push_back(i); };
            {
              typename world<F>::recording_type sink(w.fixture.sink(), w.j);
              auto p = w.template make<Policy, stop>(sink, cfg);
              p.faults().trace = &trace;
              p.faults().clock_every = every;
              p.observer().polls = &polls;
              limit = unit_limit<sink_t, Policy>(w.fixture.sink(), split);
              p.recover();
              p.run();
            }
            w.j.on_applied = nullptr;
            for (std::int64_t i = 0; i < n; ++i)
              if (w.j.deliveries(i) != 1) {
                fail(s.name(i) + " was delivered " + std::to_string(w.j.deliveries(i)) + " times");
                break;
              }
            if (!timer)
              for (std::size_t k = 0; k < parts; ++k)
                if (w.template stored<Policy>(partition(k)) !=
                    position{s.partition_size(partition(k))})
                  fail("the stored position" + of_partition(k) + " is not the end of the log");
            ref = cut_reference(s, polls, written, batch, limit, model, t, fail);
            // The fault points are exactly the gaps of the step list over those units.
            if (ref && trace.size() != ref->points.size()) {
              fail("the pipeline stopped at " + std::to_string(trace.size()) +
                   " fault points, the step list has " + std::to_string(ref->points.size()));
              ref.reset();
            } else if (ref) {
              for (std::size_t i = 0; i < trace.size(); ++i) {
                const point_ref& q = ref->points[i];
                if (!matches(trace[i], q, unit_end_of(s, ref->units[q.unit])))
                  fail("fault point " + std::to_string(i) + " is not unit " +
                       std::to_string(q.unit) + " " + describe_point(q, model));
              }
            }
            w.fixture.close();
            check_rows(w, s, "after reopening", fail);
            if constexpr (views) {
              if (log != nullptr)
                ++log->scenarios;
              log_views(w, config + ", uncrashed run", "after reopening",
                        std::vector<bool>(static_cast<std::size_t>(n), false));
            }
          } catch (...) {
            fail("unexpected exception: " + describe(std::current_exception()));
            ref.reset();
          }
        }
        if (!ref)
          continue;

        // 2. One crash per fault point.
        for (std::size_t at = 0; at < ref->points.size(); ++at) {
          const point_ref& q = ref->points[at];
          const unit_ref& u = ref->units[q.unit];
          const crash_effect e = effect_of(model, q, u.records.size());
          std::string unit_name;
          if (parts == 1)
            unit_name = "unit [" + std::to_string(s.offset_of(u.records.front()).value()) + ", " +
                        std::to_string(s.offset_of(u.records.back()).value() + 1) + ")";
          else
            unit_name = "unit " + std::to_string(q.unit) + " (" + std::to_string(u.records.size()) +
                        " records of batch " + std::to_string(u.batch) + ")";
          const std::string where = unit_name + " " + describe_point(q, model);
          ++c.scenarios;
          ++t.crashes;
          const fail_fn fail = [&](const std::string& what) {
            c.fail(config + ", crash at point " + std::to_string(at) + ", " + where + ": " + what);
          };
          try {
            manual_clock::current = {};
            world<F> w(s);
            std::optional<fault_point> crashed;
            {
              typename world<F>::recording_type sink(w.fixture.sink(), w.j);
              auto p = w.template make<Policy, stop>(sink, cfg);
              p.faults().crash_at = at;
              p.faults().clock_every = every;
              p.faults().start(p.recover());
              try {
                p.run();
              } catch (const injected_crash& x) {
                crashed = x.at;
              }
            }
            if (!crashed) {
              fail("the run ended without reaching it (the counting run saw " +
                   std::to_string(ref->points.size()) + " points)");
              continue;
            }
            if (!matches(*crashed, q, unit_end_of(s, u))) {
              fail("the crash did not happen at this point");
              continue;
            }

            // What the crash left durable: every unit before this one, and the rows of this
            // one the step list had made durable by then; the position before the unit, or
            // after it, per partition.
            std::vector<bool> durable(static_cast<std::size_t>(n), false);
            std::vector<std::int64_t> written_end(parts, 0), before(parts, 0), after(parts, 0);
            for (std::size_t v = 0; v <= q.unit; ++v) {
              const auto& records = ref->units[v].records;
              const std::size_t rows = v < q.unit ? records.size() : e.rows_durable;
              for (std::size_t r = 0; r < records.size(); ++r) {
                const std::int64_t i = records[r];
                const auto k = static_cast<std::size_t>(s.partition_of(i).value());
                const std::int64_t end = s.offset_of(i).value() + 1;
                if (r < rows) {
                  durable[static_cast<std::size_t>(i)] = true;
                  written_end[k] = std::max(written_end[k], end);
                }
                after[k] = std::max(after[k], end);
                if (v < q.unit)
                  before[k] = std::max(before[k], end);
              }
            }
            for (std::int64_t i = 0; i < n; ++i) {
              const int want = durable[static_cast<std::size_t>(i)] ? 1 : 0;
              if (w.j.deliveries(i) != want) {
                fail("at the crash " + s.name(i) + " was delivered " +
                     std::to_string(w.j.deliveries(i)) + " times, expected " +
                     std::to_string(want));
                break;
              }
            }
            // The process is gone: every part closes, and what reopens is what was durable.
            w.fixture.close();
            check_rows(w, s, "after the crash and reopening", fail);
            // The crashed unit's rows that did not become durable: an aborted attempt of each
            // may be in the log.
            [[maybe_unused]] std::vector<bool> may_abort(static_cast<std::size_t>(n), false);
            for (std::size_t r = e.rows_durable; r < u.records.size(); ++r)
              may_abort[static_cast<std::size_t>(u.records[r])] = true;
            [[maybe_unused]] const std::string scenario =
                config + ", crash at point " + std::to_string(at) + ", " + where;
            [[maybe_unused]] std::size_t attempts = 0;
            if constexpr (views) {
              if (log != nullptr)
                ++log->scenarios;
              attempts = log_views(w, scenario, "after the crash and reopening", may_abort);
              lt.attempts_shown += attempts;
              if (attempts != 0)
                ++lt.crashes_leaving;
            }
            std::vector<std::int64_t> resume(parts, 0);
            for (std::size_t k = 0; k < parts; ++k) {
              const std::optional<position> stored = w.template stored<Policy>(partition(k));
              resume[k] = stored.value_or(position{0}).value();
              const std::string shown = stored ? std::to_string(resume[k]) : "none";
              if (timer) {
                // The timer commits only positions it has polled, never past the batch in
                // flight.
                bool polled = !stored;
                for (std::size_t b = 0; b <= u.batch && !polled; ++b)
                  polled = ref->read_after[b][k] == resume[k];
                if (!polled)
                  fail("the timer committed " + shown + of_partition(k) +
                       ", which is not a position polled up to the batch in flight");
                continue;
              }
              const std::int64_t want = e.position_durable ? after[k] : before[k];
              const std::optional<position> want_stored =
                  want == 0 ? std::nullopt : std::optional{position{want}};
              if (stored == want_stored)
                continue;
              if (resume[k] != before[k] && resume[k] != after[k])
                fail("the position read back" + of_partition(k) + " after reopening is " + shown +
                     ", neither the crashed unit's start nor its end");
              else
                fail("the position read back" + of_partition(k) + " after reopening is " + shown +
                     ", the step list has it at " + std::to_string(want) + " (the crashed unit's " +
                     (e.position_durable ? "end" : "start") + ")");
            }

            std::size_t absorbed_by_restart = 0;
            {
              typename world<F>::recording_type sink(w.fixture.sink(), w.j);
              auto p = w.template make<Policy, stop>(sink, cfg);
              p.faults().clock_every = every;
              const position recovered = p.recover();
              if (parts == 1 && recovered != position{resume[0]})
                fail("recover() resumed at " + std::to_string(recovered.value()) +
                     ", the stored position is " + std::to_string(resume[0]));
              for (std::size_t k = 0; parts > 1 && k < parts; ++k)
                if (p.read_position(partition(k)) != position{resume[k]})
                  fail("partition " + std::to_string(k) + " recovered at " +
                       std::to_string(p.read_position(partition(k)).value()) +
                       ", the stored position is " + std::to_string(resume[k]));
              p.run();
              absorbed_by_restart = p.observer().replays_absorbed;
            }
            if (!timer)
              for (std::size_t k = 0; k < parts; ++k)
                if (w.template stored<Policy>(partition(k)) !=
                    position{s.partition_size(partition(k))})
                  fail("the run to the end did not store the end of the log" + of_partition(k));
            w.fixture.close();
            check_rows(w, s, "after the run to the end and reopening", fail);
            if constexpr (views) {
              const std::size_t after =
                  log_views(w, scenario, "after the run to the end", may_abort);
              if (after != attempts && log != nullptr)
                log->fail(scenario + ": the read_uncommitted view shows " + std::to_string(after) +
                          " aborted attempts after the run to the end, " +
                          std::to_string(attempts) + " after the crash: the run after it aborted " +
                          "or lost some");
            }

            // The reference: records in [written_end, resume) of a partition are skipped for
            // good, records in [resume, written_end) are written again.
            std::vector<bool> expect_lost(static_cast<std::size_t>(n), false);
            std::vector<bool> expect_replay(static_cast<std::size_t>(n), false);
            std::vector<window> windows;
            for (std::size_t k = 0; k < parts; ++k) {
              const std::int64_t base = s.starts[k];
              for (std::int64_t off = written_end[k]; off < resume[k]; ++off)
                expect_lost[static_cast<std::size_t>(base + off)] = true;
              for (std::int64_t off = resume[k]; off < written_end[k]; ++off)
                expect_replay[static_cast<std::size_t>(base + off)] = true;
              windows.push_back(window{base + std::min(written_end[k], resume[k]),
                                       base + std::max(written_end[k], resume[k])});
            }
            const outcome r = reconcile_deliveries<guarantee>(w, n, {}, windows, fail);
            std::vector<bool> replayed(static_cast<std::size_t>(n), false);
            for (std::int64_t i = 0; i < n; ++i) {
              const int d = w.j.deliveries(i);
              replayed[static_cast<std::size_t>(i)] = d >= 2;
              if (d > 2)
                fail(s.name(i) + " was delivered " + std::to_string(d) + " times after one crash");
            }
            if (r.lost_flags != expect_lost)
              fail("lost " + s.ranges(r.lost_flags) + ", the step list says " +
                   s.ranges(expect_lost));
            if (replayed != expect_replay)
              fail("replayed " + s.ranges(replayed) + ", the step list says " +
                   s.ranges(expect_replay));
            check_final_state(w, s, true, fail);
            const std::size_t bound = timer ? ref->batches[u.batch].size() : u.records.size();
            if (r.lost > bound)
              fail("lost " + std::to_string(r.lost) + " records (" + s.ranges(r.lost_flags) +
                   "), more than the " + std::to_string(bound) + " of one unit");
            if constexpr (reports_absorbed) {
              if (w.j.absorbed != r.replay_deliveries)
                fail("the offset guard absorbed " + std::to_string(w.j.absorbed) + " of " +
                     std::to_string(r.replay_deliveries) + " replayed writes");
              // Only the restart replays; the pipeline tells its observer what the sink said.
              if (absorbed_by_restart != w.j.absorbed)
                fail("the pipeline's observer heard of " + std::to_string(absorbed_by_restart) +
                     " absorbed replays, the sink reported " + std::to_string(w.j.absorbed));
            }
            if (r.lost != 0) {
              ++t.losing;
              t.records_lost += r.lost;
              if (r.lost > t.largest_loss) {
                t.largest_loss = r.lost;
                t.largest_loss_example = config + ", crash " + where + ": ";
                if (parts == 1)
                  t.largest_loss_example += "position stored " + std::to_string(resume[0]) +
                                            ", written up to " + std::to_string(written_end[0]) +
                                            ", ";
                t.largest_loss_example += "lost " + s.ranges(r.lost_flags);
              }
            }
            if (r.replayed != 0) {
              ++t.replaying;
              t.records_replayed += r.replayed;
            }
            t.absorbed += w.j.absorbed;
            t.regressions += w.regressions;
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
         "), " + std::to_string(t.regressions) + " regressions seen");
  if (!t.largest_loss_example.empty())
    c.note("largest loss: " + t.largest_loss_example);
  if (log != nullptr)
    close_log_section(*log, lt, t.crashes);
  c.measured["crashes"] = t.crashes;
  c.measured["losing"] = t.losing;
  c.measured["records lost"] = t.records_lost;
  c.measured["largest loss"] = t.largest_loss;
  c.measured["replaying"] = t.replaying;
  c.measured["records replayed"] = t.records_replayed;
  c.measured["absorbed"] = t.absorbed;
  c.measured["regressions"] = t.regressions;
  c.measured["short polls"] = t.short_polls;
}

}  // namespace detail

/// Whether the rules accept `Policy` over fixture F's parts, as the kit builds the pipeline (a
/// store only where the order keeps the position outside the sink, the clock only under
/// AutoCommit, dead letters only under dead_letter<N>).
template <conformance_fixture F, class Policy, class Handling = stop>
inline constexpr bool legal_over_v = detail::pipeline_for<F, Policy, Handling>::legal;

/// Runs the crash matrix of `Policy` over fixture F's parts as one entry of `r`, "crash matrix
/// <policy>", if the rules allow it there; else lists it as not run. Returns whether it ran.
template <conformance_fixture F, class Policy>
bool run_crash_matrix_of(report& r, const conformance_options& o = {}) {
  if constexpr (legal_over_v<F, Policy>) {
    check_report& c = r.add("crash matrix " + detail::policy_name<Policy>());
    check_report* log = nullptr;
    if constexpr (fixture_traits<F>::has_uncommitted_view)
      log = &r.add("transactional log " + detail::policy_name<Policy>());
    detail::run_policy_matrix<F, Policy>(c, o, log);
    return true;
  } else {
    r.not_run.push_back("crash matrix " + detail::policy_name<Policy>() +
                        ": not legal over these parts");
    return false;
  }
}

/// Runs the crash matrix for every policy x trigger legal over fixture F's parts; one entry per
/// policy in `r`.
template <conformance_fixture F>
void run_crash_matrix(report& r, const conformance_options& o = {}) {
  detail::for_each_type(detail::all_policies{},
                        [&]<class P>(std::type_identity<P>) { run_crash_matrix_of<F, P>(r, o); });
}

}  // namespace commit_order::testing
