// SPDX-License-Identifier: BSL-1.0
// The exhaustive crash matrix: for one policy, every legal sink x batch size x split limit (x
// clock pattern under AutoCommit), a crash at every fault point the policy's executed step list
// has, a restart with a fresh pipeline, and a comparison of what survived with a reference
// model computed from the log and the step list.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "crash/crash_support.hpp"

namespace crash {

inline constexpr std::int64_t matrix_records = 30;
inline constexpr std::int64_t matrix_accounts = 5;
inline constexpr std::array<std::size_t, 3> matrix_batches{1, 7, 512};
inline constexpr std::array<std::size_t, 2> matrix_splits{0, 3};
/// AutoCommit: the manual clock moves one interval every k-th fault point.
inline constexpr std::array<std::size_t, 5> matrix_clock_patterns{1, 2, 3, 5, 8};

struct combination_result {
  std::string name;
  std::size_t scenarios = 0;
  std::size_t losing = 0;  ///< scenarios that lost records
  std::size_t records_lost = 0;
  std::size_t largest_loss = 0;
  std::string largest_loss_example;
  std::size_t replaying = 0;  ///< scenarios that replayed records into the sink
  std::size_t records_replayed = 0;
  std::size_t absorbed = 0;     ///< replays the offset guard kept out
  std::size_t regressions = 0;  ///< a key's durable row went back to an older event
  std::vector<std::string> failures;
};

inline std::string describe(const point_ref& q, const unit_ref& u, const step_model& m) {
  std::string s = "unit [" + std::to_string(u.begin) + ", " + std::to_string(u.end) + ") ";
  if (q.where == co::fault_point::kind::after_row) {
    s += "after row " + std::to_string(q.row) + " of the write";
  } else {
    static constexpr std::array<const char*, 7> names{
        "poll", "write", "commit position", "begin", "store position", "commit", "timed commit"};
    s += "after step " + std::to_string(q.index) + " (" +
         names[static_cast<std::size_t>(m.kinds[q.index])] + ")";
  }
  return s;
}

template <class Policy, class Table>
combination_result run_combination() {
  using sink_t = journal_sink<Table>;
  using pipeline_t =
      pipeline_for<Policy, sink_t, co::with_faults<scenario_faults>, co::with_clock<manual_clock>,
                   co::with_observer<co::counting_observer>>;
  using guarantee = co::guarantee_t<Policy>;
  constexpr bool uses_store = co::policy_facts_v<Policy>.uses_position_store;
  constexpr bool per_record = std::is_same_v<typename Policy::trigger, co::EveryRecord>;
  constexpr bool at_most_once = policy_kind_of_v<Policy> == policy_kind::at_most_once;
  const step_model model = model_of(co::effective_steps_t<Policy>::kinds,
                                    co::has_capability_v<Table, co::Transactional>);
  const auto n = static_cast<std::size_t>(matrix_records);

  event_log log = make_event_log(matrix_records, matrix_accounts);

  combination_result res;
  res.name = policy_name<Policy>() + " / " + name_of(kind_of_v<Table>);

  // What outlives a pipeline: the table, the store, the journal (never moved: the sink points
  // into it).
  struct world {
    Table table;
    store st;
    journal j;
    sink_t sink;
    explicit world(std::size_t offsets) : j(offsets), sink(table, j) {}
  };
  auto make = [&log](world& w, co::settings s) {
    if constexpr (uses_store) {
      return pipeline_t(log, w.sink, w.st, s);
    } else {
      return pipeline_t(log, w.sink, s);
    }
  };
  auto stored = [](const world& w) -> std::optional<co::position> {
    if constexpr (uses_store) {
      return w.st.load();
    } else {
      return w.table.load_position();
    }
  };

  std::vector<std::size_t> clock_patterns{0};
  if (model.timer)
    clock_patterns.assign(matrix_clock_patterns.begin(), matrix_clock_patterns.end());

  for (const std::size_t batch : matrix_batches) {
    for (const std::size_t split : matrix_splits) {
      for (const std::size_t every : clock_patterns) {
        const co::settings s{.batch_size = batch, .max_transaction_rows = split};
        const std::vector<unit_ref> units =
            reference_units(0, matrix_records, batch, split, per_record);
        const std::vector<point_ref> points = reference_points(model, units);
        std::set<std::int64_t> batch_ends{0};
        for (const unit_ref& u : units)
          batch_ends.insert(u.batch_end);
        const std::string config = "batch " + std::to_string(batch) + " split " +
                                   std::to_string(split) +
                                   (model.timer ? " clock every " + std::to_string(every) : "");
        auto fail = [&](const std::string& where, const std::string& what) {
          res.failures.push_back(res.name + ", " + config + ", " + where + ": " + what);
        };

        // 1. Enumerate the fault points with a counting run: they must be exactly the gaps of
        //    the policy's own step list, unit by unit.
        {
          manual_clock::current = {};
          world w(n);
          std::vector<co::fault_point> trace;
          auto p = make(w, s);
          p.faults().trace = &trace;
          p.faults().clock_every = every;
          p.run();
          if (trace.size() != points.size()) {
            fail("enumeration", "the pipeline stopped at " + std::to_string(trace.size()) +
                                    " fault points, the step list has " +
                                    std::to_string(points.size()));
            continue;
          }
          for (std::size_t i = 0; i < points.size(); ++i) {
            if (!matches(trace[i], points[i], units[points[i].unit]))
              fail("enumeration", "fault point " + std::to_string(i) + " is not " +
                                      describe(points[i], units[points[i].unit], model));
          }
          for (std::size_t o = 0; o < n; ++o) {
            if (w.j.delivered[o] != 1)
              fail("enumeration", "an uninterrupted run did not deliver offset " +
                                      std::to_string(o) + " exactly once");
          }
        }

        // 2. One crash per point, then a fresh pipeline over the same log, table and store.
        for (std::size_t c = 0; c < points.size(); ++c) {
          const point_ref& q = points[c];
          const unit_ref& u = units[q.unit];
          const crash_effect e = effect_of(model, q, u);
          const std::string where = describe(q, u, model);
          ++res.scenarios;

          manual_clock::current = {};
          world w(n);
          std::optional<co::fault_point> crashed;
          {
            auto p = make(w, s);
            p.faults().crash_at = c;
            p.faults().clock_every = every;
            try {
              p.run();
            } catch (const co::injected_crash& x) {
              crashed = x.at;
            }
          }
          if (!crashed || !matches(*crashed, q, u)) {
            fail(where, "the crash did not happen at this point");
            continue;
          }

          // What the crash left durable: every unit before this one, and the rows of this one
          // the policy had made durable.
          const std::int64_t written_end = u.begin + static_cast<std::int64_t>(e.rows_durable);
          for (std::size_t o = 0; o < n; ++o) {
            const int want = static_cast<std::int64_t>(o) < written_end ? 1 : 0;
            if (w.j.delivered[o] != want) {
              fail(where, "at the crash offset " + std::to_string(o) + " was delivered " +
                              std::to_string(w.j.delivered[o]) + " times, expected " +
                              std::to_string(want));
              break;
            }
          }
          const std::optional<co::position> at_crash = stored(w);
          std::int64_t resume = 0;  // where the restart must begin
          if (model.timer) {
            // The timer commits only positions it has polled, never beyond the batch in flight.
            resume = at_crash.value_or(co::position{0}).value();
            if (batch_ends.count(resume) == 0 || resume > u.batch_end)
              fail(where, "the timer committed " + std::to_string(resume) +
                              ", which is not a polled position up to " +
                              std::to_string(u.batch_end));
          } else {
            resume = e.position_durable ? u.end : u.begin;
            const std::optional<co::position> want =
                resume == 0 ? std::nullopt : std::optional{co::position{resume}};
            if (at_crash != want)
              fail(where, "the stored position at the crash is " +
                              (at_crash ? std::to_string(at_crash->value()) : "none") +
                              ", expected " + std::to_string(resume));
          }

          // The reference: records in [written_end, resume) are skipped for good; records in
          // [resume, written_end) are written again.
          std::vector<bool> expect_lost(n, false), expect_replay(n, false);
          for (std::int64_t o = written_end; o < resume; ++o)
            expect_lost[static_cast<std::size_t>(o)] = true;
          for (std::int64_t o = resume; o < written_end; ++o)
            expect_replay[static_cast<std::size_t>(o)] = true;

          std::size_t absorbed_by_restart = 0;
          {
            auto r = make(w, s);
            r.faults().clock_every = every;
            const co::position recovered = r.recover();
            if (recovered != co::position{resume})
              fail(where, "recovered at " + std::to_string(recovered.value()) + ", expected " +
                              std::to_string(resume));
            r.run();
            absorbed_by_restart = r.observer().replays_absorbed;
          }

          // Observed: what the sink received durably, over both lives.
          std::vector<bool> lost(n, false), replayed(n, false);
          std::size_t n_lost = 0, n_replayed = 0;
          for (std::size_t o = 0; o < n; ++o) {
            lost[o] = w.j.delivered[o] == 0;
            replayed[o] = w.j.delivered[o] >= 2;
            n_lost += lost[o] ? 1 : 0;
            n_replayed += replayed[o] ? 1 : 0;
            if (w.j.delivered[o] > 2)
              fail(where, "offset " + std::to_string(o) + " delivered " +
                              std::to_string(w.j.delivered[o]) + " times after one crash");
          }
          if (lost != expect_lost)
            fail(where, "lost " + ranges(lost) + ", the model says " + ranges(expect_lost));
          if (replayed != expect_replay)
            fail(where,
                 "replayed " + ranges(replayed) + ", the model says " + ranges(expect_replay));

          // The type's guarantee, checked on what happened.
          if (!guarantee::may_lose && n_lost != 0)
            fail(where, "records lost under " + std::string(guarantee::name) + ": " + ranges(lost));
          if (!guarantee::may_duplicate && n_replayed != 0)
            fail(where, "records written twice under " + std::string(guarantee::name) + ": " +
                            ranges(replayed));
          if constexpr (at_most_once) {
            // At most one unit of work per crash: without the timer, the unit (one split); with
            // it, the batch in flight that the timer committed before its write.
            const std::size_t bound =
                model.timer ? static_cast<std::size_t>(u.batch_end - u.batch_begin) : u.size();
            if (n_lost > bound)
              fail(where, "lost " + std::to_string(n_lost) + " records, more than " +
                              std::to_string(bound));
          }

          // The sink's own state.
          if constexpr (keyed_v<Table>) {
            // No duplicate rows, and each row is the last event of its key that was not lost.
            const auto want = last_per_account(log, expect_lost);
            if (w.table.size() != want.size())
              fail(where, "the table has " + std::to_string(w.table.size()) + " rows, expected " +
                              std::to_string(want.size()));
            for (const auto& [account, last] : want) {
              const auto* row = w.table.find(account_key{}(account_event{account, 0}));
              if (row == nullptr || row->source_offset != co::offset{last.first} ||
                  row->row.seq != last.second) {
                fail(where, "account " + std::to_string(account) +
                                " does not hold its last event (offset " +
                                std::to_string(last.first) + ")");
              }
            }
          } else {
            // Duplicates allowed; count them by offset and check the set is complete.
            std::vector<int> rows(n, 0);
            w.table.for_each(
                [&](const auto& r) { ++rows[static_cast<std::size_t>(r.source_offset.value())]; });
            for (std::size_t o = 0; o < n; ++o) {
              if (rows[o] != w.j.delivered[o])
                fail(where, "the table holds offset " + std::to_string(o) + " " +
                                std::to_string(rows[o]) + " times, the journal says " +
                                std::to_string(w.j.delivered[o]));
              if ((rows[o] == 0) != expect_lost[o])
                fail(where, "offset " + std::to_string(o) + " missing from the set");
            }
          }
          if constexpr (guarded_v<Table>) {
            if (w.j.regressions != 0)
              fail(where, "an older event overwrote a newer one on an offset-guarded sink");
            // Every replay is a record the sink already holds: the guard must absorb each one.
            if (w.j.absorbed != n_replayed || absorbed_by_restart != n_replayed)
              fail(where, "the guard absorbed " + std::to_string(w.j.absorbed) + " of " +
                              std::to_string(n_replayed) + " replays");
          } else if (w.j.absorbed != 0) {
            fail(where, "an unguarded sink reported an absorbed replay");
          }
          if (!model.timer) {
            const std::optional<co::position> final_position = stored(w);
            if (final_position != co::position{matrix_records})
              fail(where, "the final stored position is not the end of the log");
          }

          res.regressions += w.j.regressions;
          res.absorbed += w.j.absorbed;
          if (n_lost != 0) {
            ++res.losing;
            res.records_lost += n_lost;
            if (n_lost > res.largest_loss) {
              res.largest_loss = n_lost;
              res.largest_loss_example = config + ", crash " + where + ": position stored " +
                                         std::to_string(resume) + ", written up to " +
                                         std::to_string(written_end) + ", lost " + ranges(lost);
            }
          }
          if (n_replayed != 0) {
            ++res.replaying;
            res.records_replayed += n_replayed;
          }
        }
      }
    }
  }
  return res;
}

inline void report(const combination_result& r) {
  std::cout << "  " << r.name << ": " << r.scenarios << " crash scenarios; lost records in "
            << r.losing << " (" << r.records_lost << " records, at most " << r.largest_loss
            << " per crash); replayed in " << r.replaying << " (" << r.records_replayed
            << " records, " << r.absorbed << " absorbed by the guard); " << r.regressions
            << " regressions seen\n";
  if (!r.largest_loss_example.empty())
    std::cout << "    largest loss: " << r.largest_loss_example << "\n";
}

/// Runs the matrix for every sink `Policy` may legally be combined with, checks that these are
/// exactly the sinks the rules allow (docs/legality.md), and that the failure direction the type
/// declares is the one observed — in both senses: never a direction the type rules out, and each
/// direction it admits actually reached by some crash.
template <class Policy>
std::size_t run_policy_matrix() {
  std::size_t scenarios = 0;
  std::vector<sink_kind> ran, allowed;
  std::vector<combination_result> results;
  for_each_type(all_tables{}, [&]<class Table>(std::type_identity<Table>) {
    if (design_allows(policy_kind_of_v<Policy>, trigger_kind_of_v<Policy>, kind_of_v<Table>))
      allowed.push_back(kind_of_v<Table>);
    if constexpr (legal_v<Policy, journal_sink<Table>, co::with_faults<scenario_faults>,
                          co::with_clock<manual_clock>, co::with_observer<co::counting_observer>>) {
      ran.push_back(kind_of_v<Table>);
      results.push_back(run_combination<Policy, Table>());
    }
  });
  CHECK(ran == allowed);

  using guarantee = co::guarantee_t<Policy>;
  std::cout << policy_name<Policy>() << " (" << guarantee::name << ")\n";
  for (const combination_result& r : results) {
    report(r);
    scenarios += r.scenarios;
    INFO(r.name);
    CHECK(r.scenarios > 0);
    // The declared direction is the observed one.
    CHECK((r.losing > 0) == guarantee::may_lose);
    CHECK((r.replaying > 0) == guarantee::may_duplicate);
    const std::size_t shown = std::min<std::size_t>(r.failures.size(), 20);
    for (std::size_t i = 0; i < shown; ++i)
      FAIL_CHECK(r.failures[i]);
    CHECK_MESSAGE(r.failures.empty(), r.failures.size() << " failed checks in " << r.name);
  }
  MESSAGE(policy_name<Policy>() << ": " << scenarios << " crash scenarios over " << results.size()
                                << " sinks");
  return scenarios;
}

}  // namespace crash
