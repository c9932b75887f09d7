// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/power_checks.hpp — `Synced` checked across simulated power cuts.
//
// A process crash keeps the page cache; a power cut keeps only what was synced. Every part that
// declares Synced (or more) is run under the fixture's power-cut facility: a workload runs once
// uninterrupted to count its sync points, then once per cut point (each sync point, or a seeded
// sample above `max_cut_points`) from fresh storage with the power going out there; every part
// is closed, the storage becomes what survived, and the part is reopened and compared with
// what it acknowledged before the cut:
//   sink    units of work (a transaction of two rows and a position on a Transactional sink,
//           else one row each): the sink must hold exactly what some prefix of the units
//           leaves — never less than the acknowledged units, never a part of a transaction,
//           nothing never begun — with every row the row its record makes;
//   store   position commits: the store holds the last acknowledged one, or one begun after it;
//   source  appends (fixture.append): the log holds every acknowledged record, unchanged, and
//           nothing that was never appended;
//   pipeline  AtLeastOnce and TransactionalPosition over the fixture's parts, when every part
//           they use is Synced: cut anywhere in a run, recovered from what survived and run to
//           the end, no record is lost — at recovery every record behind the stored position
//           has its effect in the sink, and at the end every key holds its last record.
// A part declared Synced in a fixture without a power-cut facility is a failure, never a pass.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/detail/loop/parts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"
#include "commit_order/testing/capability_checks.hpp"
#include "commit_order/testing/detail/scenario.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/options.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing {

namespace detail {

template <class T>
inline constexpr bool declares_synced_v =
    declares_durability<T>&& durability_t<T>::rank >= Synced::rank;

/// Cut points 1..syncs to try: all of them, or a seeded sample with the first and the last.
inline std::vector<std::uint64_t> choose_cut_points(std::uint64_t syncs,
                                                    const conformance_options& o) {
  std::vector<std::uint64_t> points;
  if (syncs <= o.max_cut_points || o.max_cut_points < 2) {
    for (std::uint64_t p = 1; p <= syncs; ++p)
      points.push_back(p);
    return points;
  }
  std::vector<std::uint64_t> middle;
  for (std::uint64_t p = 2; p < syncs; ++p)
    middle.push_back(p);
  std::mt19937_64 rng(o.cut_sample_seed);
  for (std::size_t i = middle.size(); i > 1; --i)  // Fisher-Yates with rng() % n: reproducible
    std::swap(middle[i - 1], middle[static_cast<std::size_t>(rng() % i)]);
  middle.resize(static_cast<std::size_t>(o.max_cut_points - 2));
  points = {1, syncs};
  points.insert(points.end(), middle.begin(), middle.end());
  std::sort(points.begin(), points.end());
  return points;
}

/// What a workload acknowledged before the power went out.
struct acknowledged {
  std::int64_t units = 0;  ///< units whose last call returned before the cut
  std::int64_t begun = 0;  ///< units started (the one under way at the cut included)
};

/// Runs `run` once uninterrupted and once per cut point, each time from fresh storage built by
/// `prepare`; after each, the storage becomes what survived and `check` judges it.
template <class F, class Prepare, class Run, class Check>
void run_cut_points(check_report& c, const conformance_options& o, Prepare prepare, Run run,
                    Check check) {
  std::uint64_t syncs = 0;
  auto one = [&](std::uint64_t cut_at) {
    ++c.scenarios;
    const std::string where = cut_at == 0 ? std::string("cut after the end")
                                          : "cut at sync point " + std::to_string(cut_at);
    const fail_fn fail = [&c, &where](const std::string& what) { c.fail(where + ": " + what); };
    try {
      F f;
      prepare(f);
      f.close();
      auto& power = f.power();
      power.watch();
      power.arm(cut_at);
      acknowledged ack;
      try {
        ack = run(f);
      } catch (...) {
        fail("the workload failed: " + describe(std::current_exception()));
      }
      f.close();
      if (cut_at == 0)
        syncs = static_cast<std::uint64_t>(power.syncs());
      else if (!power.is_out())
        fail("the run ended before its sync point (the workload is not deterministic)");
      power.restore();
      check(f, ack, fail);
      f.close();
    } catch (...) {
      fail("unexpected exception: " + describe(std::current_exception()));
    }
  };
  one(0);
  const auto points = choose_cut_points(syncs, o);
  for (const std::uint64_t p : points)
    one(p);
  c.note(std::to_string(syncs) + " sync points in an uninterrupted run, " +
         std::to_string(points.size() + 1) + " cut points tried");
  if (syncs == 0)
    c.fail("the workload made no sync point: nothing it acknowledged was ever made durable");
}

// ---- the sink --------------------------------------------------------------------------------

struct power_unit {
  std::vector<expected_write> writes;
  std::optional<position> stored;
};

inline std::vector<power_unit> sink_units(std::int64_t units, bool transactional,
                                          std::int64_t keys) {
  std::vector<power_unit> out;
  std::map<std::int64_t, std::int64_t> seq;
  std::int64_t at = 0;
  for (std::int64_t u = 0; u < units; ++u) {
    power_unit unit;
    const int rows = transactional ? 2 : 1;
    for (int r = 0; r < rows; ++r) {
      // Keys repeat across units, so later units overwrite rows earlier ones wrote.
      const std::int64_t k = (u + 2 * r) % keys;
      unit.writes.push_back(expected_write{k, at++, seq[k]++});
    }
    if (transactional)
      unit.stored = position{at};
    out.push_back(std::move(unit));
  }
  return out;
}

template <class F>
void check_sink_synced(report& r, const conformance_options& o) {
  using sink_t = typename F::sink_type;
  constexpr bool transactional = has_capability_v<sink_t, Transactional>;
  constexpr bool keyed = has_capability_v<sink_t, Idempotent>;
  check_report& c = r.add("Synced sink: every acknowledged write survives a power cut");
  const auto units = sink_units(o.power_units, transactional, 3);
  auto state_after = [&](std::int64_t m) {
    std::vector<expected_write> writes;
    std::optional<position> stored;
    for (std::int64_t u = 0; u < m; ++u) {
      const auto& unit = units[static_cast<std::size_t>(u)];
      writes.insert(writes.end(), unit.writes.begin(), unit.writes.end());
      if (unit.stored)
        stored = unit.stored;
    }
    return std::pair{rows_left_by(writes, keyed), stored};
  };
  run_cut_points<F>(
      c, o, [](F& f) { f.sink(); },
      [&](F& f) {
        acknowledged ack;
        auto& power = f.power();
        if (power.is_out())
          return ack;  // the cut came while the sink opened
        auto& s = f.sink();
        for (const auto& unit : units) {
          if (power.is_out())
            return ack;
          ++ack.begun;
          if constexpr (transactional) {
            s.begin();
            for (const auto& w : unit.writes)
              apply_event(f, w.offset, w.key, w.seq);
            commit_order::detail::partition_zero_of(s).store_position(partition_id{0},
                                                                      *unit.stored);
            s.commit();
          } else {
            for (const auto& w : unit.writes)
              apply_event(f, w.offset, w.key, w.seq);
          }
          if (power.is_out())
            return ack;
          ++ack.units;
        }
        return ack;
      },
      [&](F& f, const acknowledged& ack, const fail_fn& fail) {
        using traits = fixture_traits<F>;
        std::vector<expected_write> got;
        bool rows_ok = true;
        for (const auto& row : f.rows()) {
          // Identify the write by its offset: every offset was written once, by one unit.
          const expected_write* w = nullptr;
          for (const auto& unit : units)
            for (const auto& x : unit.writes)
              if (x.offset == row.source_offset.value())
                w = &x;
          if (w == nullptr || w->key != row.key) {
            fail("the sink holds a row (key " + std::to_string(row.key) + ", offset " +
                 std::to_string(row.source_offset.value()) + ") that was never written");
            rows_ok = false;
            continue;
          }
          if (!(row.row == traits::row_of(F::make_event(w->key, w->seq)))) {
            fail("the row of offset " + std::to_string(w->offset) +
                 " is not the row its record makes (corrupted)");
            rows_ok = false;
          }
          got.push_back(*w);
        }
        if (!rows_ok)
          return;
        std::sort(got.begin(), got.end());
        std::optional<position> stored;
        if constexpr (transactional)
          stored = f.sink().load_position();
        std::optional<std::int64_t> prefix;
        for (std::int64_t m = static_cast<std::int64_t>(units.size()); m >= 0 && !prefix; --m)
          if (state_after(m) == std::pair{got, stored})
            prefix = m;
        if (!prefix)
          fail("the sink holds " + show(got) + " (position " +
               (stored ? std::to_string(stored->value()) : std::string("none")) +
               "), which no prefix of the units leaves: a torn transaction or a lost row");
        else if (*prefix < ack.units)
          fail("the sink holds what the first " + std::to_string(*prefix) + " units leave, but " +
               std::to_string(ack.units) +
               " units were acknowledged: acknowledged writes were lost");
        else if (*prefix > ack.begun)
          fail("the sink holds " + std::to_string(*prefix) + " units, only " +
               std::to_string(ack.begun) + " were begun");
      });
}

// ---- the position store ------------------------------------------------------------------------

template <class F>
void check_store_synced(report& r, const conformance_options& o) {
  check_report& c =
      r.add("Synced position store: the last acknowledged commit survives a power cut");
  std::vector<position> commits;
  for (std::int64_t u = 0; u < o.power_units; ++u)
    commits.push_back(position{3 * (u + 1)});
  run_cut_points<F>(
      c, o, [](F& f) { f.store(); },
      [&](F& f) {
        acknowledged ack;
        auto& power = f.power();
        if (power.is_out())
          return ack;
        auto& st = f.store();
        for (const position p : commits) {
          if (power.is_out())
            return ack;
          ++ack.begun;
          commit_order::detail::partition_zero_store_of(st).commit(partition_id{0}, p);
          if (power.is_out())
            return ack;
          ++ack.units;
        }
        return ack;
      },
      [&](F& f, const acknowledged& ack, const fail_fn& fail) {
        const std::optional<position> got = f.store().load();
        std::optional<std::int64_t> prefix;
        for (std::int64_t m = 0; m <= static_cast<std::int64_t>(commits.size()) && !prefix; ++m) {
          const std::optional<position> want =
              m == 0 ? std::nullopt : std::optional{commits[static_cast<std::size_t>(m - 1)]};
          if (got == want)
            prefix = m;
        }
        const std::string shown = got ? std::to_string(got->value()) : std::string("none");
        if (!prefix)
          fail("the store holds position " + shown + ", which was never committed");
        else if (*prefix < ack.units)
          fail("the store holds position " + shown + " but the commit of " +
               std::to_string(commits[static_cast<std::size_t>(ack.units - 1)].value()) +
               " was acknowledged");
        else if (*prefix > ack.begun)
          fail("the store holds position " + shown + ", committed after the cut");
      });
}

// ---- the source --------------------------------------------------------------------------------

template <class F>
void check_source_synced(report& r, const conformance_options& o) {
  using traits = fixture_traits<F>;
  check_report& c = r.add("Synced source: every acknowledged append survives a power cut");
  const auto s = make_stream<F>(o.power_units, 3, 2);
  run_cut_points<F>(
      c, o,
      [](F& f) {
        f.create_log(std::span<const typename traits::event_type>());
        f.source();
      },
      [&](F& f) {
        acknowledged ack;
        auto& power = f.power();
        for (const auto& e : s.events) {
          if (power.is_out())
            return ack;
          ++ack.begun;
          const offset at = f.append(e);
          if (power.is_out())
            return ack;
          if (at != offset{ack.units})
            throw std::logic_error("append returned offset " + std::to_string(at.value()) +
                                   " for record " + std::to_string(ack.units));
          ++ack.units;
        }
        return ack;
      },
      [&](F& f, const acknowledged& ack, const fail_fn& fail) {
        auto& src = f.source();
        if (src.earliest() != position{0})
          fail("earliest() is " + std::to_string(src.earliest().value()) + " after the cut");
        src.seek(src.earliest());
        std::int64_t count = 0;
        for (;;) {
          auto batch = src.poll(64);
          if (std::ranges::size(batch) == 0)
            break;
          for (const auto& rec : batch) {
            const std::int64_t at = offset_of(rec).value();
            if (at != count) {
              fail("the log holds offset " + std::to_string(at) + " where " +
                   std::to_string(count) + " was expected");
              return;
            }
            if (at >= s.size() || !(event_of(rec) == s.events[static_cast<std::size_t>(at)])) {
              fail("record " + std::to_string(at) + " is not what was appended (corrupted)");
              return;
            }
            ++count;
          }
        }
        if (count < ack.units)
          fail("the log holds " + std::to_string(count) + " records, " + std::to_string(ack.units) +
               " appends were acknowledged");
        else if (count > ack.begun)
          fail("the log holds " + std::to_string(count) + " records, only " +
               std::to_string(ack.begun) + " were appended");
      });
}

// ---- whole pipelines -------------------------------------------------------------------------

/// A pipeline over F's open parts (no faults injected).
template <class F, class Policy>
typename pipeline_for<F, Policy>::type make_pipeline(F& f,
                                                     recording_sink<typename F::sink_type>& sink,
                                                     const settings& cfg) {
  using pf = pipeline_for<F, Policy>;
  using pipeline_t = typename pf::type;
  if constexpr (pf::uses_store)
    return pipeline_t(f.source(), sink, f.store(), cfg);
  else
    return pipeline_t(f.source(), sink, cfg);
}

template <class F, class Policy>
void check_pipeline_synced(report& r, const conformance_options& o) {
  using traits = fixture_traits<F>;
  using sink_t = typename traits::sink_type;
  using pf = pipeline_for<F, Policy>;
  constexpr bool keyed = has_capability_v<sink_t, Idempotent>;
  check_report& c =
      r.add("power cuts in a pipeline, " + policy_name<Policy>() + ": no acknowledged record lost");
  const auto s = make_stream<F>(o.power_records, 4, 3);
  const std::int64_t n = s.size();
  auto stored_of = [](F& f) -> std::optional<position> {
    if constexpr (pf::facts.position_in_sink)
      return f.sink().load_position();
    else
      return f.store().load();
  };
  for (const std::size_t batch : o.power_batches) {
    const settings cfg{.batch_size = batch};
    const std::size_t before = c.failure_count;
    run_cut_points<F>(
        c, o,
        [&](F& f) {
          f.create_log(std::span<const typename traits::event_type>(s.events));
          f.sink();
          if constexpr (pf::uses_store)
            f.store();
        },
        [&](F& f) {
          acknowledged ack;
          auto& power = f.power();
          if (power.is_out())
            return ack;
          journal j;
          recording_sink<sink_t> sink(f.sink(), j);
          auto p = make_pipeline<F, Policy>(f, sink, cfg);
          p.recover();
          while (!power.is_out() && p.poll_once() != 0) {
          }
          return ack;
        },
        [&](F& f, const acknowledged&, const fail_fn& fail) {
          const std::string at = "units of " + std::to_string(batch) + ": ";
          // At recovery: every record behind the stored position has its effect in the sink.
          const std::optional<position> stored = stored_of(f);
          const std::int64_t p = stored.value_or(position{0}).value();
          if (p > n) {
            fail(at + "the stored position " + std::to_string(p) + " is past the log's end");
            return;
          }
          // Keyed: key -> the offset its row holds. Otherwise: offset -> its rows.
          std::map<std::int64_t, std::int64_t> held;
          for (const auto& row : f.rows()) {
            if (keyed)
              held[row.key] = row.source_offset.value();
            else
              ++held[row.source_offset.value()];
          }
          std::map<std::int64_t, std::int64_t> vouched;
          for (std::int64_t i = 0; i < p; ++i)
            vouched[keyed ? s.keys[static_cast<std::size_t>(i)] : i] = i;
          for (const auto& [k, i] : vouched) {
            const auto it = held.find(k);
            if (it == held.end() || (keyed && it->second < i)) {
              fail(at + "the position survived at " + std::to_string(p) + " but record " +
                   std::to_string(i) + " behind it has no effect in the sink: lost");
              break;
            }
          }
          // Then a fresh pipeline runs to the end: nothing may be missing.
          {
            journal j;
            recording_sink<sink_t> sink(f.sink(), j);
            auto pl = make_pipeline<F, Policy>(f, sink, cfg);
            pl.recover();
            pl.run();
          }
          if (stored_of(f) != position{n})
            fail(at + "the run to the end did not store the end of the log");
          std::map<std::int64_t, std::int64_t> last;
          for (std::int64_t i = 0; i < n; ++i)
            last[keyed ? s.keys[static_cast<std::size_t>(i)] : i] = i;
          std::map<std::int64_t, int> copies;
          for (const auto& row : f.rows()) {
            const std::int64_t o2 = row.source_offset.value();
            if (o2 < 0 || o2 >= n ||
                !(row.row == traits::row_of(s.events[static_cast<std::size_t>(o2)]))) {
              fail(at + "a row (offset " + std::to_string(o2) + ") is no record of the log");
              continue;
            }
            ++copies[keyed ? row.key : o2];
            if (keyed && last[row.key] != o2)
              fail(at + "key " + std::to_string(row.key) + " ends on offset " + std::to_string(o2) +
                   ", not on its last record " + std::to_string(last[row.key]));
          }
          for (const auto& [k, i] : last)
            if (copies[k] == 0)
              fail(at + (keyed ? "key " : "offset ") + std::to_string(k) + " has no row: lost");
            else if (keyed && copies[k] > 1)
              fail(at + "key " + std::to_string(k) + " has " + std::to_string(copies[k]) + " rows");
        });
    if (c.failure_count == before)
      c.note("units of " + std::to_string(batch) + ": no loss");
  }
}

}  // namespace detail

/// Checks every part of fixture F that declares Synced across simulated power cuts, and adds
/// one entry per part (and per no-loss policy) to `r`.
template <single_partition_fixture F>
void check_synced(report& r, const conformance_options& o = {}) {
  using traits = fixture_traits<F>;
  using sink_t = typename traits::sink_type;
  constexpr bool sink_synced = detail::declares_synced_v<sink_t>;
  constexpr bool store_synced = [] {
    if constexpr (traits::has_store)
      return detail::declares_synced_v<typename traits::store_type>;
    else
      return false;
  }();
  constexpr bool source_synced =
      !traits::source_is_stand_in && detail::declares_synced_v<typename traits::source_type>;

  if constexpr (!sink_synced && !store_synced && !source_synced) {
    r.not_run.push_back("Synced: no part under test declares it");
  } else if constexpr (!traits::has_power) {
    // A durability claim nobody checked must not read as a pass.
    auto missing = [&r](const std::string& part) {
      check_report& c = r.add("Synced " + part + ": every acknowledged write survives a power cut");
      c.fail("the " + part +
             " declares Synced but the fixture has no power-cut facility (power()): the claim "
             "cannot be checked, and an unchecked claim is not a pass");
    };
    if (sink_synced)
      missing("sink");
    if (store_synced)
      missing("position store");
    if (source_synced)
      missing("source");
  } else {
    if constexpr (sink_synced)
      detail::check_sink_synced<F>(r, o);
    if constexpr (store_synced)
      detail::check_store_synced<F>(r, o);
    if constexpr (source_synced) {
      if constexpr (traits::has_append) {
        detail::check_source_synced<F>(r, o);
      } else {
        check_report& c = r.add("Synced source: every acknowledged append survives a power cut");
        c.fail(
            "the source declares Synced but the fixture offers no append(event) to write it "
            "under power cuts");
      }
    }
    // Whole pipelines, where every part they rely on is Synced.
    detail::for_each_type(
        detail::type_list<AtLeastOnce<EveryBatch>, TransactionalPosition<EveryBatch>>{},
        [&]<class P>(std::type_identity<P>) {
          using pf = detail::pipeline_for<F, P>;
          constexpr bool parts_synced =
              sink_synced &&
              (traits::source_is_stand_in ||
               detail::declares_synced_v<typename traits::source_type>)&&(!pf::uses_store ||
                                                                          store_synced);
          if constexpr (pf::legal && parts_synced)
            detail::check_pipeline_synced<F, P>(r, o);
          else
            r.not_run.push_back("power cuts in a pipeline, " + detail::policy_name<P>() +
                                ": not legal, or not every part it uses is Synced");
        });
  }
}

}  // namespace commit_order::testing
