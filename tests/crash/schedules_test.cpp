// SPDX-License-Identifier: BSL-1.0
// Random schedules: crashes at random fault points, sink failures under every error handling,
// and retention while the consumer is down, over every legal policy x sink, with invariants that
// hold whatever the schedule did.
//
// PRNG: std::mt19937_64 (its output sequence is fixed by the standard); draws are `rng() % n`,
// not std::uniform_int_distribution, whose algorithm differs between standard libraries. Each
// schedule has its own seed, derived from a base seed and the schedule's index by splitmix64.
//
//   COMMIT_ORDER_CRASH_SCHEDULES=N    run N schedules (default 10000)
//   COMMIT_ORDER_CRASH_BASE_SEED=S    derive the schedules' seeds from S instead of the default
//   COMMIT_ORDER_CRASH_SEED=S         run the single schedule with seed S (printed on failure)
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "crash/crash_support.hpp"
#include "support/flaky.hpp"

namespace co = commit_order;
using namespace crash;

namespace {

constexpr std::uint64_t default_base_seed = 0xC0FFEE0DDBA11ULL;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::optional<std::uint64_t> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    return std::nullopt;
  return std::strtoull(v, nullptr, 0);
}

using letters = co::memory::dead_letters<account_event>;

using all_handlings = type_list<co::stop, co::retry<2>, co::dead_letter<1>>;

template <class H>
std::string handling_name() {
  if constexpr (H::dead_letters)
    return "dead_letter<" + std::to_string(H::retries) + ">";
  else if constexpr (H::retries > 0)
    return "retry<" + std::to_string(H::retries) + ">";
  else
    return "stop";
}

/// Crashes at the n-th point; under AutoCommit moves the clock one interval at random points;
/// remembers where the unit in flight began (units are contiguous from the recovered position).
struct schedule_faults {
  std::size_t crash_at = never;
  std::size_t seen = 0;
  std::mt19937_64* clock_rng = nullptr;
  std::int64_t unit_begin = 0;
  std::int64_t last_unit_end = 0;
  std::size_t current_unit = never;

  void start(co::position p) { unit_begin = last_unit_end = p.value(); }
  void at(const co::fault_point& p) {
    if (p.unit != current_unit) {
      current_unit = p.unit;
      unit_begin = last_unit_end;
    }
    last_unit_end = p.unit_end.value();
    if (clock_rng != nullptr && (*clock_rng)() % 4 == 0)
      manual_clock::advance(std::chrono::milliseconds{5000});
    if (seen++ == crash_at)
      throw co::injected_crash{p};
  }
};

struct totals {
  std::size_t schedules = 0;
  std::size_t lives = 0;
  std::size_t crashes = 0;
  std::size_t record_failures = 0;
  std::size_t retention_runs = 0;
  std::size_t positions_lost = 0;  ///< position_lost raised, as expected
  std::size_t dead_lettered = 0;
  std::size_t records_lost = 0;  ///< by lossy policies, each inside an incident's window
  std::size_t records_replayed = 0;
  std::map<std::string, std::size_t> per_config;
};

struct schedule_failure {
  std::string what;
};

/// One schedule of one configuration, driven by `rng`. Returns normally or throws
/// schedule_failure with what went wrong and the schedule's story so far.
template <class Policy, class Table, class Handling>
void run_schedule(std::mt19937_64& rng, totals& t) {
  using jsink_t = journal_sink<Table>;
  using sink_t = test_support::flaky_sink<jsink_t>;
  constexpr bool uses_store = co::policy_facts_v<Policy>.uses_position_store;
  constexpr bool timer = co::policy_facts_v<Policy>.position_on_timer;
  constexpr bool dead_letters = Handling::dead_letters;
  using guarantee = co::guarantee_t<Policy>;
  using pipeline_t = std::conditional_t<
      dead_letters,
      pipeline_for<Policy, sink_t, co::with_faults<schedule_faults>, co::with_clock<manual_clock>,
                   co::with_error_handling<Handling>, co::with_dead_letters<letters>>,
      pipeline_for<Policy, sink_t, co::with_faults<schedule_faults>, co::with_clock<manual_clock>,
                   co::with_error_handling<Handling>>>;

  auto draw = [&rng](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  static constexpr std::array<std::size_t, 7> batches{1, 2, 3, 5, 7, 16, 512};
  static constexpr std::array<std::size_t, 4> splits{0, 0, 2, 3};

  const std::int64_t n = 20 + draw(21);
  event_log log = make_event_log(n, 3 + draw(4));
  const co::settings s{
      .batch_size = batches[static_cast<std::size_t>(draw(batches.size()))],
      .max_transaction_rows = splits[static_cast<std::size_t>(draw(splits.size()))]};
  std::map<co::offset, int> failures;
  for (std::int64_t k = draw(4); k > 0; --k)
    failures[co::offset{draw(static_cast<std::uint64_t>(n))}] = 1 + static_cast<int>(draw(3));
  const std::map<co::offset, int> failures_at_start = failures;
  const std::int64_t crash_lives = draw(5);
  std::mt19937_64 clock_rng(rng());

  std::ostringstream story;
  story << policy_name<Policy>() << " / " << name_of(kind_of_v<Table>) << " / "
        << handling_name<Handling>() << "; " << n << " records, batch " << s.batch_size << " split "
        << s.max_transaction_rows << "; failing offsets:";
  for (const auto& [o, f] : failures)
    story << " " << o << "x" << f;
  auto fail = [&story](const std::string& what) {
    throw schedule_failure{what + "\n    schedule: " + story.str()};
  };

  Table table;
  store st;
  journal j(static_cast<std::size_t>(n));
  jsink_t jsink(table, j);
  sink_t sink{jsink, failures};
  letters dl;
  manual_clock::current = {};

  auto stored = [&]() -> std::optional<co::position> {
    if constexpr (uses_store)
      return st.load();
    else
      return table.load_position();
  };
  auto make = [&]() {
    if constexpr (uses_store && dead_letters)
      return pipeline_t(log, sink, st, dl, s);
    else if constexpr (uses_store)
      return pipeline_t(log, sink, st, s);
    else if constexpr (dead_letters)
      return pipeline_t(log, sink, dl, s);
    else
      return pipeline_t(log, sink, s);
  };

  // Where a crash or a failed record may have lost or replayed records: the unit in flight,
  // from the lower of its start and the stored position, to the read position.
  std::vector<std::pair<std::int64_t, std::int64_t>> windows;
  std::optional<co::position> lost_at;  // position_lost ended the schedule here
  bool done = false;
  for (std::int64_t life = 0; !done; ++life) {
    if (life > 200)
      fail("no progress after 200 restarts");
    // Retention while the consumer is down: sometimes below the stored position, sometimes
    // past it. (Not before anything is stored: a consumer with no position is a fresh one and
    // starts at earliest() by design.)
    if (life > 0 && stored() && draw(4) == 0) {
      const std::int64_t lo = log.earliest().value();
      const co::position cut{lo + draw(static_cast<std::uint64_t>(log.end().value() - lo + 1))};
      log.truncate_before(cut);
      ++t.retention_runs;
      story << "; retention to " << cut;
    }
    ++t.lives;
    auto p = make();
    p.faults().crash_at = life < crash_lives ? static_cast<std::size_t>(draw(4 * n)) : never;
    if constexpr (timer)
      p.faults().clock_rng = &clock_rng;

    const std::optional<co::position> before = stored();
    const co::position earliest = log.earliest();
    const bool must_be_lost = before && *before < earliest;
    try {
      const co::position start = p.recover();
      if (must_be_lost)
        fail("recovered at " + std::to_string(start.value()) + " although the stored position " +
             std::to_string(before->value()) + " is below earliest " +
             std::to_string(earliest.value()));
      if (start != before.value_or(earliest))
        fail("recovered at " + std::to_string(start.value()) + " instead of the stored position");
      p.faults().start(start);
    } catch (const co::position_lost& e) {
      if (!must_be_lost)
        fail(std::string("unexpected position_lost: ") + e.what());
      if (e.stored() != *before || e.earliest() != earliest)
        fail("position_lost names the wrong offsets");
      ++t.positions_lost;
      story << "; position_lost at " << before->value();
      lost_at = before;
      break;
    }

    try {
      p.run();
      done = true;
      story << "; ran to the end";
    } catch (const co::injected_crash& x) {
      ++t.crashes;
      const std::int64_t s_now = stored().value_or(co::position{0}).value();
      windows.emplace_back(std::min(p.faults().unit_begin, s_now), p.read_position().value());
      story << "; crash at point " << p.faults().crash_at << " (unit end " << x.at.unit_end
            << ", stored " << s_now << ")";
    } catch (const co::record_failed& e) {
      ++t.record_failures;
      story << "; record " << e.failed() << " failed (committed " << e.committed() << ")";
      if (failures_at_start.count(e.failed()) == 0)
        fail("record_failed for an offset that was never made to fail");
      if (!guarantee::may_lose && e.lost())
        fail("a no-loss policy reports a failed record as lost");
      if (stored().value_or(co::position{0}) != e.committed())
        fail("record_failed reports committed " + std::to_string(e.committed().value()) +
             " but the durable position is elsewhere");
      const std::int64_t s_now = stored().value_or(co::position{0}).value();
      windows.emplace_back(std::min(p.faults().unit_begin, s_now), p.read_position().value());
    } catch (const std::exception& e) {
      fail(std::string("unexpected exception: ") + e.what());
    }
  }

  // ---- invariants ----------------------------------------------------------------------------
  const auto un = static_cast<std::size_t>(n);
  // Records the consumer was due to have handled: all of them, or those below the position
  // that retention overtook (position_lost reports the rest; it does not hide them).
  const std::int64_t due = lost_at ? lost_at->value() : n;
  std::vector<bool> lettered(un, false);
  for (const auto& l : dl.letters()) {
    lettered[static_cast<std::size_t>(l.source_offset.value())] = true;
    // retry<N> / dead_letter<N> give each failed record N more attempts before giving up on it.
    const int attempts = static_cast<int>(Handling::retries) + 1;
    auto it = failures_at_start.find(l.source_offset);
    if (it == failures_at_start.end() || it->second < attempts)
      fail("dead-lettered offset " + std::to_string(l.source_offset.value()) +
           " never failed often enough");
  }
  t.dead_lettered += dl.letters().size();

  auto in_window = [&windows](std::int64_t o) {
    for (const auto& [a, b] : windows)
      if (a <= o && o < b)
        return true;
    return false;
  };
  std::size_t lost = 0, replayed = 0;
  for (std::int64_t o = 0; o < due; ++o) {
    const int d = j.delivered[static_cast<std::size_t>(o)];
    if (d == 0 && !lettered[static_cast<std::size_t>(o)]) {
      ++lost;
      if (!guarantee::may_lose)
        fail("offset " + std::to_string(o) + " was lost under " + std::string(guarantee::name));
      if (!in_window(o))
        fail("offset " + std::to_string(o) + " was lost outside any crash or failure window");
    }
    if (d >= 2) {
      ++replayed;
      if (!guarantee::may_duplicate)
        fail("offset " + std::to_string(o) + " was written twice under " +
             std::string(guarantee::name));
      if (!in_window(o))
        fail("offset " + std::to_string(o) + " was replayed outside any crash or failure window");
    }
  }
  t.records_lost += lost;
  t.records_replayed += replayed;

  if constexpr (guarded_v<Table>) {
    if (j.regressions != 0)
      fail("an older event overwrote a newer one on an offset-guarded sink");
  }
  if constexpr (keyed_v<Table>) {
    // No duplicate rows: one row per key, holding the newest event the sink received. (An
    // unguarded sink can be left behind by a replay cut short; only a finished run must be.)
    if (guarded_v<Table> || done) {
      std::map<std::int64_t, std::int64_t> newest;  // account -> offset
      for (const auto& r : log.records())
        if (j.delivered[static_cast<std::size_t>(r.source_offset.value())] > 0)
          newest[r.event.account] = r.source_offset.value();
      if (table.size() < newest.size())
        fail("the table lost rows");
      for (const auto& [account, o] : newest) {
        const auto* row = table.find(account_key{}(account_event{account, 0}));
        if (row == nullptr || row->source_offset != co::offset{o})
          fail("account " + std::to_string(account) + " does not hold its newest event " +
               std::to_string(o));
      }
    }
  } else {
    std::vector<int> rows(un, 0);
    table.for_each(
        [&](const auto& r) { ++rows[static_cast<std::size_t>(r.source_offset.value())]; });
    for (std::size_t o = 0; o < un; ++o)
      if (rows[o] != j.delivered[o])
        fail("the append table and the journal disagree on offset " + std::to_string(o));
  }
  if (done && !timer && stored() != co::position{n})
    fail("the run finished but the stored position is not the end of the log");
  t.per_config[policy_name<Policy>() + " / " + name_of(kind_of_v<Table>) + " / " +
               handling_name<Handling>()]++;
}

using runner = void (*)(std::mt19937_64&, totals&);

std::vector<std::pair<std::string, runner>> legal_configurations() {
  std::vector<std::pair<std::string, runner>> out;
  for_each_type(all_policies{}, [&]<class P>(std::type_identity<P>) {
    for_each_type(all_tables{}, [&]<class T>(std::type_identity<T>) {
      for_each_type(all_handlings{}, [&]<class H>(std::type_identity<H>) {
        using sink_t = test_support::flaky_sink<journal_sink<T>>;
        constexpr bool legal = [] {
          if constexpr (H::dead_letters)
            return legal_v<P, sink_t, co::with_faults<schedule_faults>,
                           co::with_clock<manual_clock>, co::with_error_handling<H>,
                           co::with_dead_letters<letters>>;
          else
            return legal_v<P, sink_t, co::with_faults<schedule_faults>,
                           co::with_clock<manual_clock>, co::with_error_handling<H>>;
        }();
        if constexpr (legal) {
          out.emplace_back(
              policy_name<P>() + " / " + name_of(kind_of_v<T>) + " / " + handling_name<H>(),
              &run_schedule<P, T, H>);
        }
      });
    });
  });
  return out;
}

/// Runs the schedule with this seed; returns what failed, if anything.
std::optional<std::string> run_seed(std::uint64_t seed,
                                    const std::vector<std::pair<std::string, runner>>& configs,
                                    totals& t) {
  std::mt19937_64 rng(seed);
  const auto& [name, run] = configs[rng() % configs.size()];
  ++t.schedules;
  try {
    run(rng, t);
  } catch (const schedule_failure& f) {
    return f.what;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("random schedules: crashes, sink failures and retention never break the guarantee") {
  const auto configs = legal_configurations();
  // 21 legal policy x sink combinations, each under stop, retry and dead_letter.
  REQUIRE(configs.size() == 21 * 3);

  totals t;
  std::vector<std::pair<std::uint64_t, std::string>> failed;
  if (const auto single = env_number("COMMIT_ORDER_CRASH_SEED")) {
    if (auto f = run_seed(*single, configs, t))
      failed.emplace_back(*single, *f);
  } else {
    const std::uint64_t count = env_number("COMMIT_ORDER_CRASH_SCHEDULES").value_or(10000);
    const std::uint64_t base =
        env_number("COMMIT_ORDER_CRASH_BASE_SEED").value_or(default_base_seed);
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t seed = splitmix64(base + i);
      if (auto f = run_seed(seed, configs, t))
        failed.emplace_back(seed, *f);
    }
    if (count >= 10000) {
      // Enough schedules reach every configuration and every kind of event.
      CHECK(t.per_config.size() == configs.size());
      CHECK(t.crashes > 0);
      CHECK(t.record_failures > 0);
      CHECK(t.dead_lettered > 0);
      CHECK(t.positions_lost > 0);
      CHECK(t.retention_runs > t.positions_lost);
      CHECK(t.records_lost > 0);
      CHECK(t.records_replayed > 0);
    }
  }

  std::cout << "random schedules: " << t.schedules << " schedules over " << t.per_config.size()
            << " configurations, " << t.lives << " pipeline lives; " << t.crashes << " crashes, "
            << t.record_failures << " failed records stopped a pipeline, " << t.dead_lettered
            << " dead-lettered, " << t.retention_runs << " retention runs of which "
            << t.positions_lost << " overtook the stored position (position_lost, as expected); "
            << t.records_lost
            << " records lost (all under AtMostOnce, each inside the unit in flight at a crash or "
               "failed record), "
            << t.records_replayed << " replayed\n";
  MESSAGE(t.schedules << " random schedules, " << failed.size() << " failed");
  for (std::size_t i = 0; i < failed.size() && i < 10; ++i) {
    FAIL_CHECK("COMMIT_ORDER_CRASH_SEED=" << failed[i].first << " failed: " << failed[i].second);
  }
  CHECK(failed.empty());
}
