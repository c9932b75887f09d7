// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/detail/scenario.hpp — what the conformance kit's checks share (private):
// the event stream, the policies and error handlings it tries, the pipeline it builds over a
// fixture, one scenario's world, and the model of the sink's rows the reconciliation compares
// the adapter's rows with.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/adapters/memory/dead_letters.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/guarantee.hpp"
#include "commit_order/observer.hpp"
#include "commit_order/options.hpp"
#include "commit_order/pipeline.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/rules.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/recording_sink.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing::detail {

// ---- type lists ------------------------------------------------------------------------------

template <class... T>
struct type_list {};

template <class... T, class F>
void for_each_type(type_list<T...>, F&& f) {
  (f(std::type_identity<T>{}), ...);
}

/// Every policy x trigger; the kit runs those the fixture's parts make legal.
using all_policies =
    type_list<AtMostOnce<EveryRecord>, AtMostOnce<EveryBatch>, AtMostOnce<AutoCommit>,
              AtLeastOnce<EveryRecord>, AtLeastOnce<EveryBatch>, AtLeastOnce<AutoCommit>,
              TransactionalPosition<EveryRecord>, TransactionalPosition<EveryBatch>,
              TransactionalPosition<AutoCommit>>;
/// The error handlings the random schedules try.
using all_handlings = type_list<stop, retry<2>, dead_letter<1>>;

template <class P>
std::string policy_name() {
  return std::string(P::name) + "<" + std::string(P::trigger::name) + ">";
}

template <class H>
std::string handling_name() {
  if constexpr (H::dead_letters)
    return "dead_letter<" + std::to_string(H::retries) + ">";
  else if constexpr (H::retries > 0)
    return "retry<" + std::to_string(H::retries) + ">";
  else
    return "stop";
}

inline constexpr std::size_t never = static_cast<std::size_t>(-1);

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

inline std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (const injected_crash&) {
    return "an injected crash";
  } catch (...) {
    return "a non-standard exception";
  }
}

/// "[a, b) [c, d)" for a set of offsets given as flags.
inline std::string ranges(const std::vector<bool>& flags) {
  std::string s;
  for (std::size_t i = 0; i < flags.size();) {
    if (!flags[i]) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < flags.size() && flags[j])
      ++j;
    s += (s.empty() ? "[" : " [") + std::to_string(i) + ", " + std::to_string(j) + ")";
    i = j;
  }
  return s.empty() ? "none" : s;
}

// ---- the events ------------------------------------------------------------------------------

/// The kit's events: each record updates one key; `seq` counts the key's updates in log order,
/// so a row that went back to an older event is visible. Keys follow a fixed LCG (Knuth's MMIX
/// constants): irregular, and the same in every run for one seed.
///
/// Records are numbered across partitions: partition 0's, then partition 1's, ... (`starts`);
/// on a single partition a record's number is its offset. A key belongs to one partition.
template <class Event>
struct stream {
  std::vector<Event> events;
  std::vector<std::int64_t> keys;  ///< key of each record
  std::vector<std::int64_t> seqs;  ///< its seq
  /// Where each partition's records begin, then one past the last record.
  std::vector<std::int64_t> starts{0};

  [[nodiscard]] std::int64_t size() const noexcept {
    return static_cast<std::int64_t>(events.size());
  }
  [[nodiscard]] std::size_t partitions() const noexcept { return starts.size() - 1; }
  [[nodiscard]] std::int64_t partition_size(partition_id k) const {
    const auto p = static_cast<std::size_t>(k.value());
    return starts[p + 1] - starts[p];
  }
  [[nodiscard]] std::int64_t index(partition_id k, offset o) const {
    return starts[static_cast<std::size_t>(k.value())] + o.value();
  }
  [[nodiscard]] partition_id partition_of(std::int64_t i) const {
    const auto it = std::upper_bound(starts.begin(), starts.end(), i);
    return partition_id{static_cast<std::int32_t>(it - starts.begin() - 1)};
  }
  [[nodiscard]] offset offset_of(std::int64_t i) const {
    return offset{i - starts[static_cast<std::size_t>(partition_of(i).value())]};
  }
  /// Whether (k, o) names a record of the log.
  [[nodiscard]] bool holds(partition_id k, offset o) const {
    return k.value() >= 0 && static_cast<std::size_t>(k.value()) < partitions() && o.value() >= 0 &&
           o.value() < partition_size(k);
  }
  /// "offset 5" on one partition, "partition 1 offset 5" on several.
  [[nodiscard]] std::string name(std::int64_t i) const {
    if (partitions() == 1)
      return "offset " + std::to_string(i);
    return "partition " + std::to_string(partition_of(i).value()) + " offset " +
           std::to_string(offset_of(i).value());
  }
  /// "[a, b) [c, d)" of offsets, per partition on several ("p0 [a, b), p1 [c, d)").
  [[nodiscard]] std::string ranges(const std::vector<bool>& flags) const {
    if (partitions() == 1)
      return detail::ranges(flags);
    std::string out;
    for (std::size_t p = 0; p < partitions(); ++p) {
      const auto first = flags.begin() + std::min<std::ptrdiff_t>(starts[p], std::ssize(flags));
      const auto last = flags.begin() + std::min<std::ptrdiff_t>(starts[p + 1], std::ssize(flags));
      const std::string r = detail::ranges(std::vector<bool>(first, last));
      if (r != "none")
        out += (out.empty() ? "p" : ", p") + std::to_string(p) + " " + r;
    }
    return out.empty() ? "none" : out;
  }
};

/// `n` records on each of `partitions` partitions, each partition over `keys` keys of its own
/// (partition k's are k * keys ... k * keys + keys - 1). One LCG runs through the partitions.
template <class F>
stream<typename F::event_type> make_stream(std::size_t partitions, std::int64_t n,
                                           std::int64_t keys, std::uint64_t seed) {
  stream<typename F::event_type> s;
  std::vector<std::int64_t> next(partitions * static_cast<std::size_t>(keys), 0);
  std::uint64_t x = seed ^ 0x2545F4914F6CDD1DULL;
  for (std::size_t p = 0; p < partitions; ++p) {
    for (std::int64_t i = 0; i < n; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const auto k = static_cast<std::int64_t>(p) * keys +
                     static_cast<std::int64_t>((x >> 33) % static_cast<std::uint64_t>(keys));
      const std::int64_t q = next[static_cast<std::size_t>(k)]++;
      s.events.push_back(F::make_event(k, q));
      s.keys.push_back(k);
      s.seqs.push_back(q);
    }
    s.starts.push_back(s.size());
  }
  return s;
}

/// `n` records over `keys` keys on a single partition.
template <class F>
stream<typename F::event_type> make_stream(std::int64_t n, std::int64_t keys, std::uint64_t seed) {
  return make_stream<F>(1, n, keys, seed);
}

// ---- the fault injector ----------------------------------------------------------------------

/// Counts fault points (writing them down in `trace`, when given) and crashes at the chosen one.
/// Under AutoCommit it moves the manual clock by one interval at every `clock_every`-th point,
/// or at random points drawn from `clock_rng`, so the timer fires at boundaries that vary from
/// run to run yet repeat for one setting. On a single partition it remembers where the unit in
/// flight began: units are contiguous from the recovered position.
struct kit_faults {
  std::vector<fault_point>* trace = nullptr;
  std::size_t crash_at = never;
  std::size_t seen = 0;
  std::size_t clock_every = 0;
  std::mt19937_64* clock_rng = nullptr;
  std::chrono::milliseconds interval{5000};
  std::int64_t unit_begin = 0;
  std::int64_t unit_end = 0;
  std::int64_t last_unit_end = 0;
  std::size_t current_unit = never;

  void start(position p) {
    unit_begin = unit_end = last_unit_end = p.value();
    current_unit = never;
  }
  void at(const fault_point& p) {
    if (p.unit != current_unit) {
      current_unit = p.unit;
      unit_begin = last_unit_end;
    }
    last_unit_end = unit_end = p.unit_end.value();
    if (trace != nullptr)
      trace->push_back(p);
    const std::size_t n = seen++;
    if (clock_every != 0 && n % clock_every == clock_every - 1)
      manual_clock::advance(interval);
    if (clock_rng != nullptr && (*clock_rng)() % 4 == 0)
      manual_clock::advance(interval);
    if (n == crash_at)
      throw injected_crash{p};
  }
};

/// What the kit hears from the pipeline: the records each poll returned (when `polls` is
/// given) and the replays the sink reported absorbed.
struct kit_observer final {
  std::vector<std::size_t>* polls = nullptr;
  std::size_t replays_absorbed = 0;

  void on(events::polled, std::size_t records, position) {
    if (polls != nullptr)
      polls->push_back(records);
  }
  void on(events::replay_absorbed, offset) noexcept { ++replays_absorbed; }
};

// ---- the pipeline over a fixture -------------------------------------------------------------

template <bool Keep, class T>
using keep_if = std::conditional_t<Keep, std::tuple<T>, std::tuple<>>;

template <class Source, class Sink, class Policy, class Options>
struct pipeline_of;
template <class Source, class Sink, class Policy, class... Options>
struct pipeline_of<Source, Sink, Policy, std::tuple<Options...>> {
  using type = pipeline<Source, Sink, Policy, Options...>;
  static constexpr bool legal = can_make_pipeline<Source, Sink, Policy, Options...>;
};

/// The pipeline the kit runs for `Policy` over fixture F's parts, with the options the
/// configuration uses (a store only where the order has a position step outside the sink, a
/// clock only under AutoCommit, dead letters only under dead_letter<N>), and whether the
/// library's rules accept it. The sink is the adapter's own, behind a recording_sink.
template <class F, class Policy, class Handling = stop>
struct pipeline_for final {
  using traits = fixture_traits<F>;
  using source_type = typename traits::source_type;
  using sink_type = recording_sink<typename traits::sink_type, traits::partitioned>;
  using store_type = typename traits::store_type;
  using event_type = typename traits::event_type;
  /// Dead letters kept in memory, declared as durable as the sink (rule R12): the kit's crashes
  /// are process crashes, which memory outlives here.
  using dead_letters_type =
      memory::dead_letters<event_type, declared_durability_t<typename traits::sink_type, Volatile>>;

  static constexpr step_order_facts facts = policy_facts_v<Policy>;
  static constexpr bool uses_store = facts.uses_position_store;
  static constexpr bool timer = facts.position_on_timer;
  static constexpr bool dead_letters = Handling::dead_letters;

  using options = decltype(std::tuple_cat(
      std::declval<keep_if<uses_store && traits::has_store, with_store<store_type>>>(),
      std::declval<keep_if<timer, with_clock<manual_clock>>>(),
      std::declval<keep_if<names_transform<F>, with_transform<typename traits::transform_type>>>(),
      std::declval<std::tuple<with_faults<kit_faults>, with_observer<kit_observer>>>(),
      std::declval<keep_if<!std::is_same_v<Handling, stop>, with_error_handling<Handling>>>(),
      std::declval<keep_if<dead_letters, with_dead_letters<dead_letters_type>>>()));
  using of = pipeline_of<source_type, sink_type, Policy, options>;
  using type = typename of::type;
  static constexpr bool legal = of::legal;
};

// ---- one scenario's world --------------------------------------------------------------------

/// The model of the sink's rows, kept from the journal's deliveries: per key the record its row
/// must hold (a keyed sink), per record how many rows it must have (an append sink). Under an
/// offset guard an older record never wins, whatever the sink reports; the sink's own report
/// (applied / absorbed) must agree with the guard, and a sink that declares no guard never
/// reports a write absorbed.
struct sink_model {
  bool keyed = false;
  bool guarded = false;    ///< OffsetGuarded
  bool any_guard = false;  ///< OffsetGuarded or VersionGuarded
  const std::vector<std::int64_t>* keys = nullptr;
  std::function<std::string(std::int64_t)> name;  ///< a record's name in messages
  std::map<std::int64_t, std::int64_t> current;   ///< key -> record its row holds
  std::size_t outcome_mismatches = 0;
  std::string first_mismatch;

  void deliver(std::int64_t record, write_outcome out, bool known) {
    if (!any_guard && known && out == write_outcome::absorbed) {
      if (outcome_mismatches++ == 0)
        first_mismatch = "apply(" + name(record) +
                         ") reported absorbed, but the sink declares no guard (an unguarded sink "
                         "reported an absorbed replay)";
    }
    if (!keyed)
      return;
    const std::int64_t k = (*keys)[static_cast<std::size_t>(record)];
    auto it = current.find(k);
    const bool wins = !guarded || it == current.end() || it->second < record;
    if (guarded && known && (out == write_outcome::applied) != wins) {
      if (outcome_mismatches++ == 0)
        first_mismatch = "apply(" + name(record) + ") reported " +
                         (out == write_outcome::applied ? "applied" : "absorbed") + " while key " +
                         std::to_string(k) + "'s row held " +
                         (it == current.end() ? std::string("none") : name(it->second));
    }
    if (wins)
      current[k] = record;
  }
};

/// What outlives a pipeline in one scenario: the fixture (its storage), the journal, the model,
/// the failures still to inject and the dead letters.
template <class F>
struct world {
  using traits = fixture_traits<F>;
  using event_type = typename traits::event_type;
  using sink_type = typename traits::sink_type;
  using recording_type = recording_sink<sink_type, traits::partitioned>;
  using dead_letters_type =
      memory::dead_letters<event_type, declared_durability_t<sink_type, Volatile>>;

  const stream<event_type>* s;
  F fixture{};
  journal j;
  sink_model model;
  std::map<offset, int> failures;
  dead_letters_type letters;
  /// The regression watch (keyed sinks): per key the highest record its row showed, and the
  /// record it showed last. A row that changes to a record below the highest is a regression:
  /// a failure on an offset-guarded sink, and what an unguarded one does while a replay catches
  /// up (counted).
  std::map<std::int64_t, std::int64_t> high_water;
  std::map<std::int64_t, std::int64_t> last_seen;
  std::size_t regressions = 0;
  std::string first_regression;

  explicit world(const stream<event_type>& events) : s(&events) {
    model.keyed = has_capability_v<sink_type, Idempotent>;
    model.guarded = has_capability_v<sink_type, OffsetGuarded>;
    model.any_guard = guarded_v<sink_type>;
    model.keys = &events.keys;
    model.name = [this](std::int64_t i) { return s->name(i); };
    j.delivered.assign(events.events.size(), 0);
    if constexpr (traits::partitioned)
      j.partition_starts.assign(events.starts.begin(), events.starts.end() - 1);
    j.on_delivered = [this](std::int64_t record, write_outcome out, bool known) {
      model.deliver(record, out, known);
    };
    if (model.keyed || model.guarded) {
      // Read back after every durable change: a guarded row never goes back to an older record,
      // not even for a moment between a replayed write and the newer one after it.
      j.after_durable_change = [this] { watch(); };
    }
    if constexpr (traits::partitioned) {
      for (std::size_t p = 0; p < events.partitions(); ++p) {
        const auto first = events.events.begin() + events.starts[p];
        const auto last = events.events.begin() + events.starts[p + 1];
        fixture.create_log(partition_id{static_cast<std::int32_t>(p)},
                           std::span<const event_type>(first, last));
      }
    } else {
      fixture.create_log(std::span<const event_type>(events.events));
    }
  }
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  /// The durable position of partition k for `Policy`: in the sink's transaction, or in the
  /// store.
  template <class Policy>
  std::optional<position> stored(partition_id k = partition_id{0}) {
    if constexpr (policy_facts_v<Policy>.position_in_sink) {
      if constexpr (traits::partitioned)
        return fixture.sink().load_position(k);
      else
        return fixture.sink().load_position();
    } else if constexpr (traits::has_store) {
      if constexpr (traits::partitioned)
        return fixture.store().load(k);
      else
        return fixture.store().load();
    } else {
      return std::nullopt;
    }
  }

  /// A pipeline over the open parts (opening them). The recording sink must outlive it.
  template <class Policy, class Handling>
  typename pipeline_for<F, Policy, Handling>::type make(recording_type& sink, const settings& cfg) {
    using pf = pipeline_for<F, Policy, Handling>;
    using pipeline_t = typename pf::type;
    auto& src = fixture.source();
    if constexpr (pf::uses_store && pf::dead_letters) {
      return pipeline_t(src, sink, fixture.store(), letters, cfg);
    } else if constexpr (pf::uses_store) {
      return pipeline_t(src, sink, fixture.store(), cfg);
    } else if constexpr (pf::dead_letters) {
      return pipeline_t(src, sink, letters, cfg);
    } else {
      return pipeline_t(src, sink, cfg);
    }
  }

 private:
  void watch() {
    for (const auto& r : fixture.rows()) {
      if (!s->holds(r.source_partition, r.source_offset))
        continue;  // check_rows reports it
      const std::int64_t i = s->index(r.source_partition, r.source_offset);
      auto [seen, first] = last_seen.try_emplace(r.key, i);
      const bool changed = first || seen->second != i;
      seen->second = i;
      auto [high, fresh] = high_water.try_emplace(r.key, i);
      if (fresh)
        continue;
      if (i < high->second) {
        if (changed && regressions++ == 0)
          first_regression = "key " + std::to_string(r.key) + " went back from " +
                             s->name(high->second) + " to " + s->name(i);
      } else {
        high->second = i;
      }
    }
  }
};

// ---- reconciliation --------------------------------------------------------------------------

using fail_fn = std::function<void(const std::string&)>;

/// The sink's rows, read back, against the model: every row is the row its record makes, under
/// its record's key; a keyed sink has one row per key, at the record the model says; an append
/// sink has as many rows per record as durable deliveries.
template <class F>
void check_rows(world<F>& w, const stream<typename F::event_type>& s, const std::string& when,
                const fail_fn& fail) {
  using traits = fixture_traits<F>;
  const auto rows = w.fixture.rows();
  const std::int64_t n = s.size();
  std::map<std::int64_t, int> per_key;
  std::map<std::int64_t, std::int64_t> got;  ///< key -> record its (last) row holds
  std::vector<int> per_record(static_cast<std::size_t>(n), 0);
  for (const auto& r : rows) {
    const std::int64_t o = r.source_offset.value();
    if (!s.holds(r.source_partition, r.source_offset)) {
      if (s.partitions() == 1)
        fail(when + ": a row carries source offset " + std::to_string(o) +
             ", outside the log [0, " + std::to_string(n) + ")");
      else
        fail(when + ": a row carries partition " + std::to_string(r.source_partition.value()) +
             " offset " + std::to_string(o) + ", which is no record of the log");
      continue;
    }
    const std::int64_t i = s.index(r.source_partition, r.source_offset);
    const auto at = static_cast<std::size_t>(i);
    ++per_record[at];
    ++per_key[r.key];
    got[r.key] = i;
    if (r.key != s.keys[at])
      fail(when + ": the row of " + s.name(i) + " is stored under key " + std::to_string(r.key) +
           ", its record's key is " + std::to_string(s.keys[at]));
    else if (!(r.row == traits::row_of(s.events[at])))
      fail(when + ": the row of " + s.name(i) + " (key " + std::to_string(r.key) +
           ") is not the row its record makes");
  }
  if (w.model.keyed) {
    for (const auto& [k, count] : per_key)
      if (count > 1)
        fail(when + ": key " + std::to_string(k) + " has " + std::to_string(count) +
             " rows (a duplicate row in an Idempotent sink)");
    for (const auto& [k, i] : w.model.current) {
      auto it = got.find(k);
      if (it == got.end())
        fail(when + ": key " + std::to_string(k) + " has no row; " + s.name(i) +
             " was written durably");
      else if (it->second != i)
        fail(when + ": key " + std::to_string(k) + " holds " + s.name(it->second) +
             ", the durable writes leave " + s.name(i));
    }
    for (const auto& [k, i] : got)
      if (w.model.current.count(k) == 0)
        fail(when + ": key " + std::to_string(k) + " has a row (" + s.name(i) +
             ") though no write of it became durable");
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const int want = w.j.deliveries(i);
      const int have = per_record[static_cast<std::size_t>(i)];
      if (have != want)
        fail(when + ": " + s.name(i) + " has " + std::to_string(have) +
             " rows, it was written durably " + std::to_string(want) + " times");
    }
  }
  if (w.model.outcome_mismatches != 0)
    fail(when + ": the sink's report disagrees with its guard " +
         std::to_string(w.model.outcome_mismatches) + " times, first: " + w.model.first_mismatch);
  if (w.model.guarded && w.regressions != 0)
    fail(when + ": an offset-guarded row went back to an older offset " +
         std::to_string(w.regressions) + " times, first: " + w.first_regression);
}

/// Where a crash or a failed record may have lost or replayed records: records [begin, end).
struct window {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

/// What the deliveries add up to over a scenario's lives.
struct outcome {
  std::size_t lost = 0;
  std::size_t replayed = 0;
  std::size_t replay_deliveries = 0;  ///< deliveries beyond the first
  std::vector<bool> lost_flags;
};

/// Loss and replay over records [0, due), against the guarantee and the windows: a no-loss policy
/// loses nothing, a no-duplicate policy writes nothing twice, and what a lossy or replaying policy
/// loses or replays lies inside the unit in flight at a crash or a failed record.
template <class Guarantee, class World>
outcome reconcile_deliveries(const World& w, std::int64_t due,
                             const std::set<std::int64_t>& lettered,
                             const std::vector<window>& windows, const fail_fn& fail) {
  outcome r;
  r.lost_flags.assign(static_cast<std::size_t>(due), false);
  auto in_window = [&windows](std::int64_t o) {
    return std::any_of(windows.begin(), windows.end(),
                       [o](const window& x) { return x.begin <= o && o < x.end; });
  };
  std::vector<bool> lost_outside(static_cast<std::size_t>(due), false);
  std::vector<bool> replayed_outside(static_cast<std::size_t>(due), false);
  std::vector<bool> forbidden_loss(static_cast<std::size_t>(due), false);
  std::vector<bool> forbidden_replay(static_cast<std::size_t>(due), false);
  for (std::int64_t o = 0; o < due; ++o) {
    const auto i = static_cast<std::size_t>(o);
    const int d = w.j.deliveries(o);
    if (d == 0 && lettered.count(o) == 0) {
      ++r.lost;
      r.lost_flags[i] = true;
      if (!Guarantee::may_lose)
        forbidden_loss[i] = true;
      else if (!in_window(o))
        lost_outside[i] = true;
    }
    if (d >= 2) {
      ++r.replayed;
      r.replay_deliveries += static_cast<std::size_t>(d - 1);
      if (!Guarantee::may_duplicate)
        forbidden_replay[i] = true;
      else if (!in_window(o))
        replayed_outside[i] = true;
    }
  }
  if (std::find(forbidden_loss.begin(), forbidden_loss.end(), true) != forbidden_loss.end())
    fail("records lost under a policy that never loses (" + std::string(Guarantee::name) +
         "): " + w.s->ranges(forbidden_loss));
  if (std::find(forbidden_replay.begin(), forbidden_replay.end(), true) != forbidden_replay.end())
    fail("records written twice under a policy that never duplicates (" +
         std::string(Guarantee::name) + "): " + w.s->ranges(forbidden_replay));
  if (std::find(lost_outside.begin(), lost_outside.end(), true) != lost_outside.end())
    fail("records lost outside the unit in flight at any crash or failure: " +
         w.s->ranges(lost_outside));
  if (std::find(replayed_outside.begin(), replayed_outside.end(), true) != replayed_outside.end())
    fail("records replayed outside the unit in flight at any crash or failure: " +
         w.s->ranges(replayed_outside));
  return r;
}

/// After a run: every key's row is the newest record of that key the sink received. For an
/// unguarded sink only when `converged`: the last life finished, and nothing can have left a
/// replay cut short behind it (a replay overwrites newer rows until it catches up). With no
/// loss, that is the key's last record in the log.
template <class F>
void check_final_state(world<F>& w, const stream<typename F::event_type>& s, bool converged,
                       const fail_fn& fail) {
  if (!w.model.keyed || !(w.model.guarded || converged))
    return;
  std::map<std::int64_t, std::int64_t> newest;
  for (std::int64_t o = 0; o < s.size(); ++o)
    if (w.j.deliveries(o) > 0)
      newest[s.keys[static_cast<std::size_t>(o)]] = o;
  for (const auto& [k, o] : newest) {
    auto it = w.model.current.find(k);
    if (it == w.model.current.end() || it->second != o)
      fail("key " + std::to_string(k) + " does not end on the newest record it received (" +
           s.name(o) + ")");
  }
}

}  // namespace commit_order::testing::detail
