// SPDX-License-Identifier: BSL-1.0
// The exhaustive crash matrix over a partitioned source: a consumer manually assigned both
// partitions of a 2-partition topic, for one policy, every legal sink x batch size x split
// limit (x clock pattern under AutoCommit), a crash at every fault point of the policy's step
// list, a restart with a fresh consumer and pipeline, and a comparison, partition by partition,
// of what survived with a reference computed from the batches the source handed out and the
// step list. A unit may span both partitions; its position step covers each partition it
// touched, so the model's positions are per partition.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "crash/matrix.hpp"
#include "crash/partition_support.hpp"

namespace crash {

inline constexpr std::size_t pmatrix_partitions = 2;
inline constexpr std::int64_t pmatrix_per_partition = 15;
inline constexpr std::int64_t pmatrix_accounts = 3;

using record_ref_t = std::pair<co::partition_id, co::offset>;

/// A partitioned source over the topic that writes down the records of every batch it hands
/// out: the reference cuts units from them (how the source interleaves partitions is its own
/// business, not the pipeline's).
class recording_consumer {
 public:
  using capabilities = partitioned_event_log::capabilities;

  recording_consumer(const partitioned_event_log& log, std::vector<co::partition_id> partitions,
                     std::vector<std::vector<record_ref_t>>* batches = nullptr)
      : inner_(log.make_consumer(std::move(partitions))), batches_(batches) {}

  void seek(co::partition_id k, co::position p) { inner_.seek(k, p); }
  [[nodiscard]] auto poll(std::size_t n) {
    auto batch = inner_.poll(n);
    if (batches_ != nullptr && !batch.empty()) {
      std::vector<record_ref_t>& b = batches_->emplace_back();
      for (const auto& r : batch)
        b.emplace_back(r.source_partition, r.source_offset);
    }
    return batch;
  }
  [[nodiscard]] co::position earliest(co::partition_id k) const { return inner_.earliest(k); }
  [[nodiscard]] co::position end(co::partition_id k) const { return inner_.end(k); }
  [[nodiscard]] std::size_t partition_count() const noexcept { return inner_.partition_count(); }
  [[nodiscard]] std::vector<co::partition_id> assignment() const { return inner_.assignment(); }

 private:
  partitioned_event_log::consumer inner_;
  std::vector<std::vector<record_ref_t>>* batches_;
};

namespace detail {
template <class Policy, class Sink, class Options>
struct p_pipeline_of;
template <class Policy, class Sink, class... Options>
struct p_pipeline_of<Policy, Sink, std::tuple<Options...>> {
  using type = co::pipeline<recording_consumer, Sink, Policy, Options...>;
  static constexpr bool legal = co::can_make_pipeline<recording_consumer, Sink, Policy, Options...>;
};
template <class Policy, class Sink, class... Options>
using p_pipeline_of_t =
    p_pipeline_of<Policy, Sink,
                  decltype(std::tuple_cat(
                      std::declval<std::conditional_t<
                          co::policy_facts_v<Policy>.uses_position_store,
                          std::tuple<co::with_store<partitioned_store>>, std::tuple<>>>(),
                      std::declval<kept_option<Policy, Options>>()...))>;
}  // namespace detail

template <class Policy, class Sink, class... Options>
using p_pipeline_for = typename detail::p_pipeline_of_t<Policy, Sink, Options...>::type;
template <class Policy, class Sink, class... Options>
inline constexpr bool p_legal_v = detail::p_pipeline_of_t<Policy, Sink, Options...>::legal;

/// One unit of work as the design defines it, over the records of one batch.
struct p_unit_ref {
  std::vector<record_ref_t> records;
  std::size_t batch = 0;
  co::position end{};  ///< after the unit's last record (the fault point's unit_end)
};

/// The units the pipeline cuts the batches into: the batch, its splits of `split` records
/// (0: none), or single records when `per_record`.
inline std::vector<p_unit_ref> p_reference_units(
    const std::vector<std::vector<record_ref_t>>& batches, std::size_t split, bool per_record) {
  std::vector<p_unit_ref> units;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const std::size_t n = batches[b].size();
    std::size_t unit = n;
    if (per_record)
      unit = 1;
    else if (split != 0)
      unit = std::min(unit, split);
    for (std::size_t done = 0; done < n; done += unit) {
      p_unit_ref u;
      u.batch = b;
      const std::size_t last = std::min(n, done + unit);
      u.records.assign(batches[b].begin() + static_cast<std::ptrdiff_t>(done),
                       batches[b].begin() + static_cast<std::ptrdiff_t>(last));
      u.end = co::position::after(u.records.back().second);
      units.push_back(std::move(u));
    }
  }
  return units;
}

inline bool p_matches(const co::fault_point& got, const point_ref& want, const p_unit_ref& unit) {
  return got.where == want.where && got.step == want.step && got.step_index == want.index &&
         got.row == want.row && got.unit_end == unit.end && got.unit == want.unit;
}

inline std::string p_describe(const point_ref& q, const p_unit_ref& u, const step_model& m) {
  std::string s = "unit " + std::to_string(q.unit) + " (" + std::to_string(u.records.size()) +
                  " records of batch " + std::to_string(u.batch) + ") ";
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

/// Flags per offset of each partition.
using p_flags = std::map<co::partition_id, std::vector<bool>>;

inline std::string p_ranges(const p_flags& f) {
  std::string s;
  for (const auto& [k, flags] : f) {
    const std::string r = ranges(flags);
    if (r != "none")
      s += (s.empty() ? "p" : ", p") + std::to_string(k.value()) + " " + r;
  }
  return s.empty() ? "none" : s;
}

template <class Policy, class Table>
combination_result run_partitioned_combination() {
  using sink_t = partitioned_journal_sink<Table>;
  using pipeline_t =
      p_pipeline_for<Policy, sink_t, co::with_faults<scenario_faults>, co::with_clock<manual_clock>,
                     co::with_observer<co::counting_observer>>;
  using guarantee = co::guarantee_t<Policy>;
  constexpr bool uses_store = co::policy_facts_v<Policy>.uses_position_store;
  constexpr bool per_record = std::is_same_v<typename Policy::trigger, co::EveryRecord>;
  constexpr bool at_most_once = policy_kind_of_v<Policy> == policy_kind::at_most_once;
  constexpr bool keyed = !std::is_same_v<typename Table::key_type, co::no_key>;
  constexpr bool guarded =
      p_kind_of_v<Table> == sink_kind::guarded || p_kind_of_v<Table> == sink_kind::transactional;
  const step_model model = model_of(co::effective_steps_t<Policy>::kinds,
                                    co::has_capability_v<Table, co::Transactional>);

  const partitioned_event_log log =
      make_partitioned_log(pmatrix_partitions, pmatrix_per_partition, pmatrix_accounts);
  std::vector<co::partition_id> parts;
  for (std::size_t p = 0; p < pmatrix_partitions; ++p)
    parts.push_back(co::partition_id{static_cast<std::int32_t>(p)});
  const auto per = static_cast<std::size_t>(pmatrix_per_partition);
  auto no_flags = [&] {
    p_flags f;
    for (const co::partition_id k : parts)
      f[k].assign(per, false);
    return f;
  };

  combination_result res;
  res.name = policy_name<Policy>() + " / partitioned " + name_of(p_kind_of_v<Table>);

  struct world {
    Table table;
    partitioned_store st;
    partitioned_journal j;
    sink_t sink;
    world() : sink(table, j) {}
  };
  auto make = [](recording_consumer& c, world& w, co::settings s) {
    if constexpr (uses_store) {
      return pipeline_t(c, w.sink, w.st, s);
    } else {
      return pipeline_t(c, w.sink, s);
    }
  };
  auto stored = [](const world& w, co::partition_id k) -> std::optional<co::position> {
    if constexpr (uses_store) {
      return w.st.load(k);
    } else {
      return w.table.load_position(k);
    }
  };

  std::vector<std::size_t> clock_patterns{0};
  if (model.timer)
    clock_patterns.assign(matrix_clock_patterns.begin(), matrix_clock_patterns.end());

  for (const std::size_t batch : matrix_batches) {
    for (const std::size_t split : matrix_splits) {
      for (const std::size_t every : clock_patterns) {
        const co::settings s{.batch_size = batch, .max_transaction_rows = split};
        const std::string config = "batch " + std::to_string(batch) + " split " +
                                   std::to_string(split) +
                                   (model.timer ? " clock every " + std::to_string(every) : "");
        auto fail = [&](const std::string& where, const std::string& what) {
          res.failures.push_back(res.name + ", " + config + ", " + where + ": " + what);
        };

        // 1. An uninterrupted run: the batches the source hands out, and the fault points,
        //    which must be exactly the gaps of the policy's step list over the units cut from
        //    those batches.
        std::vector<std::vector<record_ref_t>> batches;
        std::vector<p_unit_ref> units;
        std::vector<point_ref> points;
        {
          manual_clock::current = {};
          world w;
          recording_consumer c(log, parts, &batches);
          std::vector<co::fault_point> trace;
          auto p = make(c, w, s);
          p.faults().trace = &trace;
          p.faults().clock_every = every;
          p.run();
          units = p_reference_units(batches, split, per_record);
          std::vector<unit_ref> sizes;
          for (const p_unit_ref& u : units)
            sizes.push_back(unit_ref{0, static_cast<std::int64_t>(u.records.size()), 0, 0});
          points = reference_points(model, sizes);
          if (trace.size() != points.size()) {
            fail("enumeration", "the pipeline stopped at " + std::to_string(trace.size()) +
                                    " fault points, the step list has " +
                                    std::to_string(points.size()));
            continue;
          }
          for (std::size_t i = 0; i < points.size(); ++i) {
            if (!p_matches(trace[i], points[i], units[points[i].unit]))
              fail("enumeration", "fault point " + std::to_string(i) + " is not " +
                                      p_describe(points[i], units[points[i].unit], model));
          }
          for (const co::partition_id k : parts) {
            for (std::size_t o = 0; o < per; ++o) {
              if (w.j.delivered_at(k, co::offset{static_cast<std::int64_t>(o)}) != 1)
                fail("enumeration", "an uninterrupted run did not deliver partition " +
                                        std::to_string(k.value()) + " offset " + std::to_string(o) +
                                        " exactly once");
            }
          }
        }
        // The units' records are the whole topic, each once: the batches cover it.
        std::size_t covered = 0;
        for (const p_unit_ref& u : units)
          covered += u.records.size();
        if (covered != per * parts.size())
          fail("enumeration", "the units cover " + std::to_string(covered) + " records");

        // Where each partition's read position stands after each batch (the positions an
        // AutoCommit timer may have committed).
        std::vector<std::map<co::partition_id, co::position>> read_after(batches.size());
        {
          std::map<co::partition_id, co::position> read;
          for (std::size_t b = 0; b < batches.size(); ++b) {
            for (const auto& [k, o] : batches[b])
              read[k] = co::position::after(o);
            read_after[b] = read;
          }
        }

        // 2. One crash per point, then a fresh consumer and pipeline over the same topic,
        //    table and store.
        for (std::size_t c = 0; c < points.size(); ++c) {
          const point_ref& q = points[c];
          const p_unit_ref& u = units[q.unit];
          const crash_effect e =
              effect_of(model, q, unit_ref{0, static_cast<std::int64_t>(u.records.size()), 0, 0});
          const std::string where = p_describe(q, u, model);
          ++res.scenarios;

          manual_clock::current = {};
          world w;
          std::optional<co::fault_point> crashed;
          {
            recording_consumer first(log, parts);
            auto p = make(first, w, s);
            p.faults().crash_at = c;
            p.faults().clock_every = every;
            try {
              p.run();
            } catch (const co::injected_crash& x) {
              crashed = x.at;
            }
          }
          if (!crashed || !p_matches(*crashed, q, u)) {
            fail(where, "the crash did not happen at this point");
            continue;
          }

          // The model, per partition: rows durable up to written_end, position durable at
          // resume.
          std::map<co::partition_id, std::int64_t> written_end, resume;
          p_flags durable_at_crash = no_flags();
          for (const co::partition_id k : parts)
            written_end[k] = resume[k] = 0;
          for (std::size_t v = 0; v <= q.unit; ++v) {
            const bool rows_all = v < q.unit;
            const std::size_t rows = rows_all ? units[v].records.size() : e.rows_durable;
            for (std::size_t i = 0; i < rows; ++i) {
              const auto& [k, o] = units[v].records[i];
              written_end[k] = std::max(written_end[k], o.value() + 1);
              durable_at_crash[k][static_cast<std::size_t>(o.value())] = true;
            }
            if (!model.timer && (v < q.unit || e.position_durable)) {
              for (const auto& [k, o] : units[v].records)
                resume[k] = std::max(resume[k], o.value() + 1);
            }
          }
          for (const co::partition_id k : parts) {
            for (std::size_t o = 0; o < per; ++o) {
              const int want = durable_at_crash[k][o] ? 1 : 0;
              if (w.j.delivered_at(k, co::offset{static_cast<std::int64_t>(o)}) != want) {
                fail(where, "at the crash partition " + std::to_string(k.value()) + " offset " +
                                std::to_string(o) + " was delivered " +
                                std::to_string(
                                    w.j.delivered_at(k, co::offset{static_cast<std::int64_t>(o)})) +
                                " times, expected " + std::to_string(want));
                break;
              }
            }
            const std::optional<co::position> at_crash = stored(w, k);
            if (model.timer) {
              // The timer commits only positions it has polled, never beyond the batch in
              // flight.
              resume[k] = at_crash.value_or(co::position{0}).value();
              bool polled = resume[k] == 0;
              for (std::size_t b = 0; b <= u.batch && !polled; ++b) {
                const auto it = read_after[b].find(k);
                polled = it != read_after[b].end() && it->second.value() == resume[k];
              }
              if (!polled)
                fail(where, "the timer committed " + std::to_string(resume[k]) + " for partition " +
                                std::to_string(k.value()) +
                                ", which is not a position polled up to batch " +
                                std::to_string(u.batch));
            } else {
              const std::optional<co::position> want =
                  resume[k] == 0 ? std::nullopt : std::optional{co::position{resume[k]}};
              if (at_crash != want)
                fail(where, "partition " + std::to_string(k.value()) +
                                "'s stored position at the crash is " +
                                (at_crash ? std::to_string(at_crash->value()) : "none") +
                                ", expected " + std::to_string(resume[k]));
            }
          }

          p_flags expect_lost = no_flags(), expect_replay = no_flags();
          for (const co::partition_id k : parts) {
            for (std::int64_t o = written_end[k]; o < resume[k]; ++o)
              expect_lost[k][static_cast<std::size_t>(o)] = true;
            for (std::int64_t o = resume[k]; o < written_end[k]; ++o)
              expect_replay[k][static_cast<std::size_t>(o)] = true;
          }

          std::size_t absorbed_by_restart = 0;
          {
            recording_consumer second(log, parts);
            auto r = make(second, w, s);
            r.faults().clock_every = every;
            r.recover();
            for (const co::partition_id k : parts) {
              if (r.read_position(k) != co::position{resume[k]})
                fail(where, "partition " + std::to_string(k.value()) + " recovered at " +
                                std::to_string(r.read_position(k).value()) + ", expected " +
                                std::to_string(resume[k]));
            }
            r.run();
            absorbed_by_restart = r.observer().replays_absorbed;
          }

          p_flags lost = no_flags(), replayed = no_flags();
          std::size_t n_lost = 0, n_replayed = 0;
          for (const co::partition_id k : parts) {
            for (std::size_t o = 0; o < per; ++o) {
              const int d = w.j.delivered_at(k, co::offset{static_cast<std::int64_t>(o)});
              lost[k][o] = d == 0;
              replayed[k][o] = d >= 2;
              n_lost += d == 0 ? 1 : 0;
              n_replayed += d >= 2 ? 1 : 0;
              if (d > 2)
                fail(where, "partition " + std::to_string(k.value()) + " offset " +
                                std::to_string(o) + " delivered " + std::to_string(d) +
                                " times after one crash");
            }
          }
          if (lost != expect_lost)
            fail(where, "lost " + p_ranges(lost) + ", the model says " + p_ranges(expect_lost));
          if (replayed != expect_replay)
            fail(where,
                 "replayed " + p_ranges(replayed) + ", the model says " + p_ranges(expect_replay));
          if (!guarantee::may_lose && n_lost != 0)
            fail(where,
                 "records lost under " + std::string(guarantee::name) + ": " + p_ranges(lost));
          if (!guarantee::may_duplicate && n_replayed != 0)
            fail(where, "records written twice under " + std::string(guarantee::name) + ": " +
                            p_ranges(replayed));
          if constexpr (at_most_once) {
            // At most one unit of work per crash (with the timer: the batch in flight).
            const std::size_t bound = model.timer ? batches[u.batch].size() : u.records.size();
            if (n_lost > bound)
              fail(where, "lost " + std::to_string(n_lost) + " records, more than " +
                              std::to_string(bound));
          }

          if constexpr (keyed) {
            // One row per account, holding its last event that was not lost.
            std::map<std::int64_t, std::pair<co::partition_id, std::int64_t>> want;
            std::map<std::int64_t, std::int64_t> want_seq;
            for (const co::partition_id k : parts) {
              for (const auto& r : log.records(k)) {
                if (expect_lost[k][static_cast<std::size_t>(r.source_offset.value())])
                  continue;
                want[r.event.account] = {k, r.source_offset.value()};
                want_seq[r.event.account] = r.event.seq;
              }
            }
            if (w.table.size() != want.size())
              fail(where, "the table has " + std::to_string(w.table.size()) + " rows, expected " +
                              std::to_string(want.size()));
            for (const auto& [account, last] : want) {
              const auto* row = w.table.find(account_key{}(account_event{account, 0}));
              if (row == nullptr || row->source_offset != co::offset{last.second} ||
                  row->source_partition != last.first || row->row.seq != want_seq[account])
                fail(where, "account " + std::to_string(account) +
                                " does not hold its last event (partition " +
                                std::to_string(last.first.value()) + " offset " +
                                std::to_string(last.second) + ")");
            }
          } else {
            std::map<co::partition_id, std::vector<int>> rows;
            for (const co::partition_id k : parts)
              rows[k].assign(per, 0);
            w.table.for_each([&](const auto& r) {
              ++rows[r.source_partition][static_cast<std::size_t>(r.source_offset.value())];
            });
            for (const co::partition_id k : parts) {
              for (std::size_t o = 0; o < per; ++o) {
                if (rows[k][o] != w.j.delivered_at(k, co::offset{static_cast<std::int64_t>(o)}))
                  fail(where, "the table holds partition " + std::to_string(k.value()) +
                                  " offset " + std::to_string(o) + " " +
                                  std::to_string(rows[k][o]) + " times, the journal disagrees");
                if ((rows[k][o] == 0) != expect_lost[k][o])
                  fail(where, "partition " + std::to_string(k.value()) + " offset " +
                                  std::to_string(o) + " missing from the set");
              }
            }
          }
          if constexpr (guarded) {
            if (w.j.regressions != 0)
              fail(where, "an older event overwrote a newer one on an offset-guarded sink");
            if (w.j.absorbed != n_replayed || absorbed_by_restart != n_replayed)
              fail(where, "the guard absorbed " + std::to_string(w.j.absorbed) + " of " +
                              std::to_string(n_replayed) + " replays");
          } else if (w.j.absorbed != 0) {
            fail(where, "an unguarded sink reported an absorbed replay");
          }
          if (!model.timer) {
            for (const co::partition_id k : parts) {
              if (stored(w, k) != co::position{pmatrix_per_partition})
                fail(where, "partition " + std::to_string(k.value()) +
                                "'s final stored position is not its end");
            }
          }

          res.regressions += w.j.regressions;
          res.absorbed += w.j.absorbed;
          if (n_lost != 0) {
            ++res.losing;
            res.records_lost += n_lost;
            if (n_lost > res.largest_loss) {
              res.largest_loss = n_lost;
              res.largest_loss_example = config + ", crash " + where + ": lost " + p_ranges(lost);
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

/// Runs the partitioned matrix for every sink `Policy` may legally be combined with; checks
/// these are exactly the sinks the rules allow (docs/legality.md) (with the guarded sinks
/// partition-scoped, and the unscoped guarded ones refused by R17) and that the declared failure
/// direction is the observed one.
template <class Policy>
std::size_t run_partitioned_policy_matrix() {
  std::size_t scenarios = 0;
  std::vector<sink_kind> ran, allowed;
  std::vector<combination_result> results;
  for_each_type(all_partitioned_tables{}, [&]<class Table>(std::type_identity<Table>) {
    if (design_allows(policy_kind_of_v<Policy>, trigger_kind_of_v<Policy>, p_kind_of_v<Table>))
      allowed.push_back(p_kind_of_v<Table>);
    if constexpr (p_legal_v<Policy, partitioned_journal_sink<Table>,
                            co::with_faults<scenario_faults>, co::with_clock<manual_clock>,
                            co::with_observer<co::counting_observer>>) {
      ran.push_back(p_kind_of_v<Table>);
      results.push_back(run_partitioned_combination<Policy, Table>());
    }
  });
  CHECK(ran == allowed);
  // R17: offsets of two partitions are not comparable, so a guard on offsets alone is refused.
  CHECK_FALSE(p_legal_v<Policy, partitioned_journal_sink<p_unscoped_guarded_table>>);
  CHECK_FALSE(p_legal_v<Policy, partitioned_journal_sink<transactional_table>>);

  using guarantee = co::guarantee_t<Policy>;
  std::cout << policy_name<Policy>() << " (" << guarantee::name << "), 2 partitions\n";
  for (const combination_result& r : results) {
    report(r);
    scenarios += r.scenarios;
    INFO(r.name);
    CHECK(r.scenarios > 0);
    CHECK((r.losing > 0) == guarantee::may_lose);
    CHECK((r.replaying > 0) == guarantee::may_duplicate);
    const std::size_t shown = std::min<std::size_t>(r.failures.size(), 20);
    for (std::size_t i = 0; i < shown; ++i)
      FAIL_CHECK(r.failures[i]);
    CHECK_MESSAGE(r.failures.empty(), r.failures.size() << " failed checks in " << r.name);
  }
  MESSAGE(policy_name<Policy>() << ", 2 partitions: " << scenarios << " crash scenarios over "
                                << results.size() << " sinks");
  return scenarios;
}

}  // namespace crash
