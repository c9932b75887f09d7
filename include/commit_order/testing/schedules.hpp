// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/schedules.hpp — seeded random schedules over the real adapter.
//
// Each schedule draws, from its own seed, one configuration legal over the fixture's parts
// (policy x trigger x error handling: stop, retry<2>, dead_letter<1>), a log of 12-24 records
// over 2-5 keys (the options' ranges), a batch size and split, records that fail 1-3 times before
// the sink takes them (a record's failure, which the error handling acts on), up to four lives that
// crash at a random fault point, AutoCommit's timer firing at random points, and — where the source
// has retention — retention while the consumer is down, sometimes past its stored position. Between
// lives every part is closed and reopened. Whatever happened, these hold:
//   - recover() resumes at the stored position, or raises position_lost{stored, earliest} when
//     retention overtook it (and only then);
//   - a failed record is reported as one that was made to fail, with the durable position;
//   - after every life the sink's rows are exactly what its durable writes leave;
//   - no record is lost or written twice where the policy rules it out, and whatever is lost or
//     replayed lies inside the unit in flight at a crash or a failed record;
//   - a record is dead-lettered only after failing as often as the handling allows;
//   - an offset-guarded row never goes back; a finished run ends with the position at the end
//     of the log and every key on its newest record (under AutoCommit, whose timer may commit
//     past a replay a crash cut short, an unguarded key on its last durable write).
// A failure names its seed: COMMIT_ORDER_CONFORMANCE_SEED=<seed> (see with_environment) runs that
// one schedule again, identically. PRNG: std::mt19937_64 with `rng() % n` (fixed by the standard,
// unlike the distributions); schedule seeds are splitmix64(base seed + index).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commit_order/errors.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/testing/detail/log_views.hpp"
#include "commit_order/testing/detail/scenario.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/options.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing {

namespace detail {

struct schedule_totals {
  std::size_t schedules = 0;
  std::size_t lives = 0;
  std::size_t crashes = 0;
  std::size_t record_failures = 0;
  std::size_t retention_runs = 0;
  std::size_t positions_lost = 0;
  std::size_t dead_lettered = 0;
  std::size_t records_lost = 0;
  std::size_t records_replayed = 0;
  std::size_t aborted_attempts = 0;  ///< a transactional log's, shown to read_uncommitted only
  std::map<std::string, std::size_t> per_config;
};

struct schedule_failure {
  std::string what;
};

template <class F, class Policy, class Handling>
void run_schedule(std::mt19937_64& rng, schedule_totals& t, const conformance_options& o) {
  using traits = fixture_traits<F>;
  using pf = pipeline_for<F, Policy, Handling>;
  using sink_t = typename traits::sink_type;
  using guarantee = guarantee_t<Policy>;
  constexpr bool timer = pf::timer;

  auto draw = [&rng](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  static constexpr std::array<std::size_t, 7> batches{1, 2, 3, 5, 7, 16, 512};
  static constexpr std::array<std::size_t, 4> splits{0, 0, 2, 3};

  const std::int64_t span =
      std::max<std::int64_t>(o.schedule_records_max - o.schedule_records_min, 0) + 1;
  const std::int64_t n =
      std::max<std::int64_t>(o.schedule_records_min, 1) + draw(static_cast<std::uint64_t>(span));
  const std::int64_t key_span =
      std::max<std::int64_t>(o.schedule_keys_max - o.schedule_keys_min, 0) + 1;
  const std::int64_t keys =
      std::max<std::int64_t>(o.schedule_keys_min, 1) + draw(static_cast<std::uint64_t>(key_span));
  const auto s = make_stream<F>(n, keys, rng());
  const settings cfg{.batch_size = batches[static_cast<std::size_t>(draw(batches.size()))],
                     .max_transaction_rows = splits[static_cast<std::size_t>(draw(splits.size()))]};
  std::map<offset, int> failures;
  for (std::int64_t k = draw(4); k > 0; --k)
    failures[offset{draw(static_cast<std::uint64_t>(n))}] = 1 + static_cast<int>(draw(3));
  const std::map<offset, int> failures_at_start = failures;
  const std::int64_t crash_lives = draw(5);
  std::mt19937_64 clock_rng(rng());

  std::ostringstream story;
  story << policy_name<Policy>() << " / " << handling_name<Handling>() << "; " << n
        << " records over " << keys << " keys, batch " << cfg.batch_size << " split "
        << cfg.max_transaction_rows << "; failing offsets:";
  for (const auto& [at, count] : failures)
    story << " " << at << "x" << count;
  auto fail = [&story](const std::string& what) {
    throw schedule_failure{what + "\n    schedule: " + story.str()};
  };
  const fail_fn fail_rows = [&](const std::string& what) { fail(what); };

  manual_clock::current = {};
  world<F> w(s);
  w.failures = failures;

  std::vector<window> windows;
  std::optional<position> lost_at;
  bool done = false;
  for (std::int64_t life = 0; !done; ++life) {
    if (life > 200)
      fail("no progress after 200 restarts");
    // Retention while the consumer is down: sometimes below the stored position, sometimes
    // past it. (Not before anything is stored: a consumer with no position is a fresh one and
    // starts at earliest() by design.)
    if constexpr (traits::has_retention) {
      if (life > 0 && w.template stored<Policy>() && draw(4) == 0) {
        auto& src = w.fixture.source();
        const std::int64_t lo = src.earliest().value();
        const position cut{lo + draw(static_cast<std::uint64_t>(src.end().value() - lo + 1))};
        w.fixture.truncate_before(cut);
        w.fixture.close();
        ++t.retention_runs;
        story << "; retention to " << cut << " (earliest " << w.fixture.source().earliest() << ")";
      }
    }
    ++t.lives;
    const std::optional<position> before = w.template stored<Policy>();
    const position earliest = w.fixture.source().earliest();
    const bool must_be_lost = before && *before < earliest;
    {
      recording_sink<sink_t> sink(w.fixture.sink(), w.j, &w.failures);
      auto p = w.template make<Policy, Handling>(sink, cfg);
      p.faults().crash_at = life < crash_lives ? static_cast<std::size_t>(draw(4 * n)) : never;
      if constexpr (timer)
        p.faults().clock_rng = &clock_rng;
      try {
        const position start = p.recover();
        if (must_be_lost)
          fail("recovered at " + std::to_string(start.value()) + " although the stored position " +
               std::to_string(before->value()) + " is below earliest " +
               std::to_string(earliest.value()));
        if (start != before.value_or(earliest))
          fail("recovered at " + std::to_string(start.value()) + " instead of the stored position");
        p.faults().start(start);
      } catch (const position_lost& e) {
        if (!must_be_lost)
          fail(std::string("unexpected position_lost: ") + e.what());
        if (e.stored() != *before || e.earliest() != earliest)
          fail("position_lost names the wrong offsets: " + std::string(e.what()));
        ++t.positions_lost;
        story << "; position_lost at " << before->value();
        lost_at = before;
        break;
      }

      try {
        p.run();
        done = true;
        story << "; ran to the end";
      } catch (const injected_crash& x) {
        ++t.crashes;
        const std::int64_t s_now = w.template stored<Policy>().value_or(position{0}).value();
        windows.push_back(
            window{std::min(p.faults().unit_begin, s_now), p.read_position().value()});
        story << "; crash at point " << p.faults().crash_at << " (unit end " << x.at.unit_end
              << ", stored " << s_now << ")";
      } catch (const record_failed& e) {
        ++t.record_failures;
        story << "; record " << e.failed() << " failed (committed " << e.committed() << ")";
        if (failures_at_start.count(e.failed()) == 0)
          fail("record_failed for an offset that was never made to fail: " + std::string(e.what()));
        if (!guarantee::may_lose && e.lost())
          fail("a no-loss policy reports a failed record as lost");
        const std::int64_t s_now = w.template stored<Policy>().value_or(position{0}).value();
        if (s_now != e.committed().value())
          fail("record_failed reports committed " + std::to_string(e.committed().value()) +
               " but the durable position is " + std::to_string(s_now));
        windows.push_back(
            window{std::min(p.faults().unit_begin, s_now), p.read_position().value()});
      } catch (const std::exception& e) {
        fail(std::string("unexpected exception: ") + e.what());
      }
    }
    // The process is gone: what reopens is what was durable.
    w.fixture.close();
    check_rows(w, s, "after life " + std::to_string(life) + " and reopening", fail_rows);
    if constexpr (traits::has_uncommitted_view) {
      // A transactional log, through both of its readers: one log, each record once and in
      // order for the read_committed one where the policy never writes twice, and every
      // aborted attempt before its record's committed copy (failed records retried over several
      // lives leave any number of them).
      log_totals views;
      t.aborted_attempts += check_log_views(
          w, s, "after life " + std::to_string(life), !guarantee::may_duplicate,
          std::vector<bool>(static_cast<std::size_t>(n), true), views, fail_rows, 0);
    }
  }

  // ---- invariants over the whole schedule ----------------------------------------------------
  const std::int64_t due = lost_at ? lost_at->value() : n;
  std::set<std::int64_t> lettered;
  for (const auto& l : w.letters.letters()) {
    lettered.insert(l.source_offset.value());
    // retry<N> / dead_letter<N> give each failed record N more attempts before giving up.
    const int attempts = static_cast<int>(Handling::retries) + 1;
    auto it = failures_at_start.find(l.source_offset);
    if (it == failures_at_start.end() || it->second < attempts)
      fail("dead-lettered offset " + std::to_string(l.source_offset.value()) +
           " never failed often enough");
    if (!(l.event == s.events[static_cast<std::size_t>(l.source_offset.value())]))
      fail("the dead letter of offset " + std::to_string(l.source_offset.value()) +
           " does not hold its record's event");
  }
  t.dead_lettered += w.letters.letters().size();
  const outcome r = reconcile_deliveries<guarantee>(w, due, lettered, windows, fail_rows);
  t.records_lost += r.lost;
  t.records_replayed += r.replayed;
  // An unguarded row converges on its key's newest record once a life finishes, unless the
  // policy may lose and duplicate at once (AutoCommit): its timer may commit past a replay that a
  // crash cut short, and the older rows that replay wrote stay (check_rows holds them to it).
  check_final_state(w, s, done && !(guarantee::may_lose && guarantee::may_duplicate), fail_rows);
  if (done && !timer && w.template stored<Policy>() != position{n})
    fail("the run finished but the stored position is not the end of the log");
  t.per_config[policy_name<Policy>() + " / " + handling_name<Handling>()]++;
}

template <class F>
using schedule_runner = void (*)(std::mt19937_64&, schedule_totals&, const conformance_options&);

template <class F>
std::vector<std::pair<std::string, schedule_runner<F>>> legal_schedule_configs() {
  std::vector<std::pair<std::string, schedule_runner<F>>> out;
  for_each_type(all_policies{}, [&]<class P>(std::type_identity<P>) {
    for_each_type(all_handlings{}, [&]<class H>(std::type_identity<H>) {
      if constexpr (pipeline_for<F, P, H>::legal)
        out.emplace_back(policy_name<P>() + " / " + handling_name<H>(), &run_schedule<F, P, H>);
    });
  });
  return out;
}

}  // namespace detail

/// Runs seeded random schedules over fixture F (options: schedule_count, base_seed, seed) and
/// adds one entry, "random schedules", to `r`.
template <single_partition_fixture F>
void run_random_schedules(report& r, const conformance_options& o = {}) {
  using traits = fixture_traits<F>;
  const auto configs = detail::legal_schedule_configs<F>();
  check_report& c = r.add("random schedules");
  if (configs.empty()) {
    c.fail("no configuration is legal over these parts");
    return;
  }
  detail::schedule_totals t;
  auto run_seed = [&](std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const auto& [name, run] = configs[rng() % configs.size()];
    ++t.schedules;
    ++c.scenarios;
    try {
      run(rng, t, o);
    } catch (const detail::schedule_failure& f) {
      c.fail("seed " + std::to_string(seed) +
             " (rerun with COMMIT_ORDER_CONFORMANCE_SEED=" + std::to_string(seed) + "): " + f.what);
    } catch (...) {
      c.fail("seed " + std::to_string(seed) +
             " (rerun with COMMIT_ORDER_CONFORMANCE_SEED=" + std::to_string(seed) + "), " + name +
             ": unexpected exception: " + detail::describe(std::current_exception()));
    }
  };
  if (o.seed) {
    run_seed(*o.seed);
  } else {
    for (std::size_t i = 0; i < o.schedule_count; ++i)
      run_seed(detail::splitmix64(o.base_seed + i));
    // Enough schedules reach every configuration and every kind of event; fewer prove less,
    // which the report says instead of failing.
    if (o.schedule_count >= 10 * configs.size()) {
      if (t.per_config.size() != configs.size())
        c.fail(std::to_string(t.per_config.size()) + " of " + std::to_string(configs.size()) +
               " configurations completed a schedule");
      if (t.crashes == 0)
        c.fail("no schedule crashed");
      if (t.record_failures + t.dead_lettered == 0)
        c.fail("no record failed");
      if (traits::has_retention && t.positions_lost == 0)
        c.fail("retention never overtook a stored position");
      if (traits::has_uncommitted_view && t.aborted_attempts == 0)
        c.fail(
            "no schedule left an aborted attempt for a transactional log's read_uncommitted "
            "reader: the sink takes aborted messages out, or uncommitted_rows() reads the "
            "committed view");
    }
  }
  c.measured["schedules"] = t.schedules;
  c.measured["lives"] = t.lives;
  c.measured["crashes"] = t.crashes;
  c.measured["record failures"] = t.record_failures;
  c.measured["dead-lettered"] = t.dead_lettered;
  c.measured["retention runs"] = t.retention_runs;
  c.measured["positions lost"] = t.positions_lost;
  c.measured["records lost"] = t.records_lost;
  c.measured["records replayed"] = t.records_replayed;
  c.measured["aborted attempts shown"] = t.aborted_attempts;
  c.measured["configurations"] = configs.size();
  c.measured["configurations reached"] = t.per_config.size();
  c.note(std::to_string(configs.size()) + " legal configurations, " +
         std::to_string(t.per_config.size()) + " reached; " + std::to_string(t.lives) +
         " pipeline lives, " + std::to_string(t.crashes) + " crashes, " +
         std::to_string(t.record_failures) + " failed records stopped a pipeline, " +
         std::to_string(t.dead_lettered) + " dead-lettered, " + std::to_string(t.retention_runs) +
         " retention runs (" + std::to_string(t.positions_lost) + " raised position_lost), " +
         std::to_string(t.records_lost) + " records lost (lossy policies, inside a window), " +
         std::to_string(t.records_replayed) + " replayed");
}

}  // namespace commit_order::testing
