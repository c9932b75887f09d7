// SPDX-License-Identifier: BSL-1.0
// A week of crashes, simulated (docs/failure-directions.md): a consumer at 2000 records/s
// that commits every 5 s has up to 10,000 records in flight behind each commit; one or two unclean
// shutdowns a week then lose (commit-then-write, here auto-commit) or replay (write-then-commit) up
// to 10,000 records each.
//
// A week at 2000 records/s is 1.2 billion records: too many to push through a pipeline in a
// test. The simulation is exact but cheap:
//
//  * The week's log is virtual: record i is {account i % 1000, seq i / 1000}, generated on
//    demand. The sink is keyed on (account, seq), so every record is its own row and a lost
//    record is a missing row.
//  * Time is virtual (microseconds): each row costs 1/rate (0.5 ms), each poll waits a fetch
//    latency of 0-20 ms drawn from a hash of its offset. The latency matters: it makes the
//    auto-commit timer drift against the batches, as a wall-clock timer does.
//  * Between crashes nothing can go wrong, so the stretches are accounted batch by batch in
//    arithmetic: each record is written once, the position is committed at the end of each
//    batch, and the auto-commit timer's firings follow from its rule ("commit the polled
//    position at the first boundary at least one interval after the last commit").
//  * Every batch that contains a crash moment runs the real `commit_order::pipeline` over a
//    window of the log starting at that batch, recovered into the exact state the arithmetic
//    says the consumer is in (position, and for auto-commit the timer's last firing). The fault
//    injector advances the clock per row and kills the process at the first fault point at or
//    after the crash moment; a fresh pipeline recovers after the downtime and runs until it is
//    back at a committed batch boundary, where the arithmetic takes over again.
//  * What each crash lost or replayed is measured in the window's real sink and store, and
//    compared with what the arithmetic predicted; any difference is reported as a model
//    mismatch. `validate_timer_model` also runs the real pipeline through consecutive batches
//    and compares each auto-commit with the arithmetic.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace week_of_crashes {

namespace co = commit_order;
using std::chrono::microseconds;

/// Virtual time in microseconds (a row at 2000 records/s takes 500 us).
struct virtual_clock {
  using rep = std::int64_t;
  using period = std::micro;
  using duration = microseconds;
  using time_point = std::chrono::time_point<virtual_clock>;
  static constexpr bool is_steady = true;
  static inline time_point current{};
  static time_point now() noexcept { return current; }
};
using time_point = virtual_clock::time_point;

// ---- the parameters ----------------------------------------------------------------------------

struct parameters {
  std::int64_t records_per_second = 2000;  ///< the example's rate
  std::int64_t commit_interval_ms = 5000;  ///< Kafka's default commit interval
  double crashes_per_week = 2;             ///< "one or two unclean shutdowns a week"
  std::int64_t weeks = 1;
  std::uint64_t seed = 20240607;
  std::int64_t downtime_s = 30;               ///< from the kill to the restarted consumer
  std::int64_t max_fetch_latency_us = 20000;  ///< a poll waits 0..this for the broker

  /// Records per poll: one commit interval's worth, "in flight behind each commit".
  [[nodiscard]] std::int64_t batch() const {
    return records_per_second * commit_interval_ms / 1000;
  }
  [[nodiscard]] microseconds row_cost() const {
    return microseconds{1'000'000 / records_per_second};
  }
  [[nodiscard]] microseconds interval() const { return microseconds{commit_interval_ms * 1000}; }
  [[nodiscard]] microseconds duration() const {
    return microseconds{weeks * 7 * 24 * 3600 * std::int64_t{1'000'000}};
  }
  [[nodiscard]] std::int64_t crashes() const {
    return std::llround(crashes_per_week * static_cast<double>(weeks));
  }
};

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// The fetch latency of the poll that starts at `pos`: a pure function of the seed and the
/// offset, so the arithmetic and the real pipeline see the same one.
inline microseconds fetch_latency(const parameters& p, std::int64_t pos) {
  const auto h = splitmix64(p.seed ^ (static_cast<std::uint64_t>(pos) * 0xD1B54A32D192ED03ULL));
  return microseconds{
      static_cast<std::int64_t>(h % static_cast<std::uint64_t>(p.max_fetch_latency_us + 1))};
}

/// The unclean shutdowns: `crashes()` moments drawn uniformly over the simulated time
/// (std::mt19937_64 seeded with `seed`; `% n`, so every standard library draws the same).
inline std::vector<time_point> crash_moments(const parameters& p) {
  std::mt19937_64 rng(p.seed);
  std::vector<time_point> out;
  for (std::int64_t k = 0; k < p.crashes(); ++k)
    out.emplace_back(microseconds{
        static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(p.duration().count()))});
  std::sort(out.begin(), out.end());
  return out;
}

// ---- the week's log, a window at a time --------------------------------------------------------

struct event {
  std::int64_t account = 0;
  std::int64_t seq = 0;
  friend bool operator==(const event&, const event&) = default;
};
inline constexpr std::int64_t accounts = 1000;
inline event event_at(std::int64_t offset) {
  return event{offset % accounts, offset / accounts};
}
/// The idempotency key, derived from the event: every record is its own row.
using event_key = co::key<&event::account, &event::seq>;

/// A window of the week's log from `base` on. The producer is always ahead of the consumer, so
/// the window generates records as they are polled. Each poll first waits its fetch latency.
class log_window {
 public:
  using record_type = co::logged<event>;
  /// It stands for a broker's partition, which outlives every consumer.
  using capabilities = co::capabilities<co::Replicated>;

  log_window(std::int64_t base, const parameters& p) : base_(base), read_(base), params_(&p) {}

  void seek(co::position p) {
    if (p < earliest())
      throw co::position_lost(p, earliest());
    read_ = p.value();
  }
  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    virtual_clock::current += fetch_latency(*params_, read_);
    const std::int64_t last = read_ + static_cast<std::int64_t>(max);
    while (base_ + static_cast<std::int64_t>(records_.size()) < last) {
      const std::int64_t o = base_ + static_cast<std::int64_t>(records_.size());
      records_.push_back(record_type{co::offset{o}, event_at(o)});
    }
    const auto first = static_cast<std::size_t>(read_ - base_);
    read_ = last;
    return std::span<const record_type>(records_).subspan(first, max);
  }
  /// Everything before the window was consumed before it opened.
  [[nodiscard]] co::position earliest() const noexcept { return co::position{base_}; }
  [[nodiscard]] co::position end() const noexcept {
    return co::position{std::numeric_limits<std::int64_t>::max() / 2};
  }

 private:
  std::int64_t base_;
  std::int64_t read_;
  const parameters* params_;
  std::vector<record_type> records_;
};

// ---- what the pipeline is told about, and how it is killed ------------------------------------

/// Each row costs one row's time; the process dies at the first fault point at or after the
/// crash moment.
struct week_faults {
  microseconds row_cost{500};
  time_point crash_at = time_point::max();
  void at(const co::fault_point& p) {
    if (p.where == co::fault_point::kind::after_row)
      virtual_clock::current += row_cost;
    if (virtual_clock::now() >= crash_at)
      throw co::injected_crash{p};
  }
};

struct week_observer {
  std::int64_t absorbed = 0;
  std::int64_t rows_written = 0;
  std::vector<std::pair<time_point, co::position>> fires;  ///< auto-commits: when, what
  void on(co::events::replay_absorbed, co::offset) noexcept { ++absorbed; }
  void on(co::events::row_written, co::offset) noexcept { ++rows_written; }
  void on(co::events::auto_committed, co::position p) {
    fires.emplace_back(virtual_clock::now(), p);
  }
};

using guarded_table =
    co::memory::table<event, event_key, co::capabilities<co::Idempotent, co::OffsetGuarded>>;
using transactional_table =
    co::memory::table<event, event_key,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>;
using store = co::memory::position_store<>;

// ---- results
// -------------------------------------------------------------------------------------

struct crash_report {
  time_point at{};              ///< when the process died
  std::int64_t written_to = 0;  ///< rows below this were written when it died
  std::int64_t committed = 0;   ///< the durable position when it died
  std::int64_t lost = 0;        ///< records below `committed` never written: skipped for good
  std::int64_t replayed = 0;    ///< rows the restart wrote again (absorbed by the key)
  std::int64_t redone = 0;      ///< rows rolled back with the open transaction, done again
};

struct policy_result {
  std::string policy;
  std::string guarantee;
  std::vector<crash_report> crashes;
  std::int64_t records = 0;  ///< consumed in the simulated time (the final position)
  std::int64_t rows = 0;     ///< rows in the sink: windows counted, stretches one per record
  std::int64_t lost = 0;
  std::int64_t absorbed = 0;
  std::int64_t largest_loss = 0;
  std::int64_t largest_replay = 0;
  std::int64_t windows = 0;
  std::int64_t window_records = 0;      ///< records that went through the real pipeline
  std::int64_t bad_rows = 0;            ///< rows that are not their record's event, or misplaced
  std::int64_t down_hits = 0;           ///< crash moments that fell while the consumer was down
  std::vector<std::string> mismatches;  ///< where the arithmetic and the pipeline disagreed
  [[nodiscard]] bool sink_as_expected() const { return bad_rows == 0 && rows == records; }
};

// ---- one policy's week
// ---------------------------------------------------------------------------

/// The consumer's state at a committed batch boundary: everything below `pos` is written and
/// committed; `t` is the time before the next poll; `last_fire` the timer's last commit.
struct boundary {
  std::int64_t pos = 0;
  time_point t{};
  time_point last_fire{};
};

template <class Policy, class Table>
class lane {
  static constexpr bool uses_store = co::policy_facts_v<Policy>.uses_position_store;
  static constexpr bool timer = co::policy_facts_v<Policy>.position_on_timer;
  static constexpr bool transactional = co::policy_facts_v<Policy>.uses_transaction;

 public:
  // The clock only where a timer reads it; the store only where the position lives outside the
  // sink (rules S18, S19: an option a configuration never uses is refused).
  using pipeline_t = std::conditional_t<
      timer,
      co::pipeline<log_window, Table, Policy, co::with_store<store>, co::with_clock<virtual_clock>,
                   co::with_faults<week_faults>, co::with_observer<week_observer>>,
      std::conditional_t<
          uses_store,
          co::pipeline<log_window, Table, Policy, co::with_store<store>,
                       co::with_faults<week_faults>, co::with_observer<week_observer>>,
          co::pipeline<log_window, Table, Policy, co::with_faults<week_faults>,
                       co::with_observer<week_observer>>>>;

  explicit lane(const parameters& p) : p_(p), batch_(p.batch()), h_(p.row_cost()) {}

  [[nodiscard]] co::settings settings() const {
    co::settings s{.batch_size = static_cast<std::size_t>(batch_)};
    s.auto_commit_interval = std::chrono::milliseconds{p_.commit_interval_ms};
    // Under auto-commit the timer is consulted after every record (units of one row), as a
    // background timer may fire between any two records.
    if constexpr (timer)
      s.max_transaction_rows = 1;
    return s;
  }

  /// The week. `moments` are the crash moments, sorted.
  policy_result run(const std::vector<time_point>& moments) {
    policy_result r;
    r.policy = std::string(Policy::name) + "<" + std::string(Policy::trigger::name) + ">";
    r.guarantee = std::string(co::guarantee_t<Policy>::name);
    std::deque<time_point> crashes(moments.begin(), moments.end());
    boundary b;
    const time_point end{p_.duration()};
    while (b.t < end) {
      while (!crashes.empty() && crashes.front() < b.t) {
        crashes.pop_front();
        ++r.down_hits;
      }
      if (!crashes.empty() && crashes.front() < batch_end_time(b)) {
        b = window(b, crashes, r);
        continue;
      }
      advance(b, nullptr);
      r.rows += batch_;  // an uneventful batch: each record written once
    }
    r.records = b.pos;
    for (const crash_report& c : r.crashes) {
      r.largest_loss = std::max(r.largest_loss, c.lost);
      r.largest_replay = std::max(r.largest_replay, c.replayed);
    }
    return r;
  }

  /// Runs the real pipeline through `batches` consecutive batches from `b` without a crash and
  /// compares every auto-commit (time and position) with the arithmetic. Returns the number of
  /// commits compared, or -1 on the first disagreement.
  std::int64_t validate_timer_model(boundary b, std::int64_t batches) {
    Table table;
    store st;
    log_window src(b.pos, p_);
    prepare(table, st, b.pos);
    virtual_clock::current = b.last_fire;
    pipeline_t p = make(src, table, st);
    p.faults().row_cost = h_;
    p.recover();
    virtual_clock::current = b.t;
    std::vector<std::pair<time_point, co::position>> predicted;
    boundary m = b;
    for (std::int64_t k = 0; k < batches; ++k) {
      p.poll_once();
      advance(m, &predicted);
    }
    if (p.observer().fires != predicted || virtual_clock::now() != m.t)
      return -1;
    return static_cast<std::int64_t>(predicted.size());
  }

 private:
  [[nodiscard]] time_point batch_end_time(const boundary& b) const {
    return b.t + fetch_latency(p_, b.pos) + batch_ * h_;
  }

  // The first tick j (time poll_end + j rows) at or after `target`.
  [[nodiscard]] std::int64_t first_tick(time_point poll_end, time_point target) const {
    if (target <= poll_end)
      return 0;
    return ((target - poll_end) + h_ - microseconds{1}) / h_;
  }

  /// One uneventful batch, in arithmetic. The timer commits the polled position (the batch's
  /// end) at the first boundary an interval after its last commit; the boundaries of a batch are
  /// its poll and the end of each row.
  void advance(boundary& b, std::vector<std::pair<time_point, co::position>>* fires) const {
    const time_point poll_end = b.t + fetch_latency(p_, b.pos);
    if constexpr (timer) {
      for (std::int64_t j = first_tick(poll_end, b.last_fire + p_.interval()); j <= batch_;
           j = first_tick(poll_end, b.last_fire + p_.interval())) {
        b.last_fire = poll_end + j * h_;
        if (fires != nullptr)
          fires->emplace_back(b.last_fire, co::position{b.pos + batch_});
      }
    }
    b.t = poll_end + batch_ * h_;
    b.pos += batch_;
  }

  struct prediction {
    time_point at{};
    std::int64_t committed = 0;
    std::int64_t lost = 0;
  };
  /// What the arithmetic says a crash at `moment` in the batch from `b` leaves behind.
  [[nodiscard]] prediction predict(const boundary& b, time_point moment) const {
    const time_point poll_end = b.t + fetch_latency(p_, b.pos);
    // The process dies at the first fault point at or after the moment: the poll's, or the end
    // of row j.
    const std::int64_t j = moment <= poll_end ? 0 : first_tick(poll_end, moment);
    prediction pr;
    pr.at = poll_end + j * h_;
    pr.committed = b.pos;
    if constexpr (timer) {
      // Ticks already consulted: the poll's, and those of rows before the one it died after.
      const std::int64_t fire = first_tick(poll_end, b.last_fire + p_.interval());
      if (j == 0 ? fire == 0 : fire < j)
        pr.committed = b.pos + batch_;
    }
    const std::int64_t written = transactional ? b.pos : b.pos + j;
    pr.lost = std::max<std::int64_t>(0, pr.committed - written);
    return pr;
  }

  void prepare(Table& table, store& st, std::int64_t pos) const {
    if constexpr (uses_store) {
      st.commit(co::partition_id{0}, co::position{pos});
    } else {
      table.begin();
      table.store_position(co::partition_id{0}, co::position{pos});
      table.commit();
    }
  }
  pipeline_t make(log_window& src, Table& table, store& st) const {
    if constexpr (uses_store) {
      return pipeline_t(src, table, st, settings());
    } else {
      (void)st;
      return pipeline_t(src, table, settings());
    }
  }
  static std::int64_t stored(const Table& table, store& st) {
    if constexpr (uses_store) {
      return st.load().value_or(co::position{0}).value();
    } else {
      (void)st;
      return table.load_position().value_or(co::position{0}).value();
    }
  }

  /// The batch from `b` holds a crash moment: run it — and the restart after the downtime —
  /// through the real pipeline, until the consumer is back at a committed batch boundary.
  boundary window(boundary b, std::deque<time_point>& crashes, policy_result& r) {
    ++r.windows;
    auto note = [&r](const std::string& what) { r.mismatches.push_back(r.policy + ": " + what); };
    const std::int64_t base = b.pos;
    Table table;
    store st;
    log_window src(base, p_);
    prepare(table, st, base);

    std::optional<pipeline_t> p;
    time_point recovered_at{};
    std::optional<std::size_t> restarted_by;  // the crash whose restart this pipeline is
    std::int64_t committed_at_start = base;
    auto start = [&](time_point at) {
      virtual_clock::current = at;
      // In place: a pipeline need not be movable.
      if constexpr (uses_store)
        p.emplace(src, table, st, settings());
      else
        p.emplace(src, table, settings());
      p->faults().row_cost = h_;
      committed_at_start = p->recover().value();
      recovered_at = at;
    };
    auto settle = [&]() {  // credit the replays of a restarted pipeline to its crash
      if (restarted_by) {
        r.crashes[*restarted_by].replayed += p->observer().absorbed;
        r.absorbed += p->observer().absorbed;
      }
    };
    start(b.last_fire);  // the timer last fired then
    virtual_clock::current = b.t;

    std::int64_t lost_so_far = 0;
    std::int64_t batches = 0;
    for (;;) {
      if (++batches > 1000) {
        note("the window did not return to a committed boundary");
        break;
      }
      while (!crashes.empty() && crashes.front() < virtual_clock::now()) {
        crashes.pop_front();
        ++r.down_hits;
      }
      const time_point next = crashes.empty() ? time_point::max() : crashes.front();
      // The arithmetic's state here: read position, now, the timer's last commit.
      const co::position read = p->read_position();
      const time_point last_fire =
          p->observer().fires.empty() ? recovered_at : p->observer().fires.back().first;
      const boundary here{read.value(), virtual_clock::now(), last_fire};
      // The arithmetic predicts a crash in a batch none of whose rows exist yet (a second
      // crash inside a replay would find some of them written by the life before).
      const bool fresh_batch =
          (read.value() - base) % batch_ == 0 &&
          (!table.applied_watermark() || table.applied_watermark()->value() < read.value());
      std::optional<prediction> pred;
      if (fresh_batch && next < batch_end_time(here))
        pred = predict(here, next);

      p->faults().crash_at = next;
      try {
        p->poll_once();
      } catch (const co::injected_crash&) {
        crash_report c;
        c.at = virtual_clock::now();
        c.committed = stored(table, st);
        c.written_to = table.applied_watermark() ? table.applied_watermark()->value() + 1 : base;
        // Records below the durable position that the sink lacks are skipped for good: the
        // restart begins at that position.
        std::int64_t present = 0;
        table.for_each(
            [&](const auto& row) { present += row.source_offset.value() < c.committed ? 1 : 0; });
        const std::int64_t missing = (c.committed - base) - present;
        c.lost = missing - lost_so_far;
        lost_so_far = missing;
        if constexpr (transactional)
          c.redone = p->observer().rows_written - (c.committed - committed_at_start);
        if (fresh_batch &&
            (!pred || pred->at != c.at || pred->committed != c.committed || pred->lost != c.lost)) {
          note("crash at " + std::to_string(c.at.time_since_epoch().count()) + " us: committed " +
               std::to_string(c.committed) + ", lost " + std::to_string(c.lost) +
               (pred ? "; predicted committed " + std::to_string(pred->committed) + ", lost " +
                           std::to_string(pred->lost)
                     : "; not predicted"));
        }
        settle();
        crashes.pop_front();
        r.crashes.push_back(c);
        restarted_by = r.crashes.size() - 1;
        start(virtual_clock::now() + std::chrono::seconds{p_.downtime_s});
        continue;
      }
      if (pred)
        note("a crash predicted in the batch from " + std::to_string(here.pos) + " did not happen");
      // Back at a committed batch boundary after the crash: hand over to the arithmetic.
      const co::position now_read = p->read_position();
      if (restarted_by && stored(table, st) == now_read.value() &&
          (now_read.value() - base) % batch_ == 0)
        break;
    }
    settle();

    const std::int64_t end = p->read_position().value();
    std::int64_t rows = 0;
    table.for_each([&](const auto& row) {
      const std::int64_t o = row.source_offset.value();
      if (o < base || o >= end || !(row.row == event_at(o)))
        ++r.bad_rows;
      ++rows;
    });
    r.rows += rows;
    r.lost += (end - base) - rows;
    r.window_records += end - base;
    if ((end - base) - rows != lost_so_far)
      note("rows missing from the window differ from the losses measured at its crashes");
    const time_point last_fire =
        p->observer().fires.empty() ? recovered_at : p->observer().fires.back().first;
    return boundary{end, virtual_clock::now(), last_fire};
  }

  parameters p_;
  std::int64_t batch_;
  microseconds h_;
};

using auto_commit_lane = lane<co::AtMostOnce<co::AutoCommit>, guarded_table>;
using at_least_once_lane = lane<co::AtLeastOnce<co::EveryBatch>, guarded_table>;
using transactional_lane = lane<co::TransactionalPosition<co::EveryBatch>, transactional_table>;

struct week_result {
  parameters params;
  std::vector<time_point> moments;
  std::vector<policy_result> policies;  ///< auto-commit, at-least-once, transactional
};

/// The week, under the three policies, with the same crash moments.
inline week_result simulate(const parameters& p) {
  week_result w{p, crash_moments(p), {}};
  w.policies.push_back(auto_commit_lane(p).run(w.moments));
  w.policies.push_back(at_least_once_lane(p).run(w.moments));
  w.policies.push_back(transactional_lane(p).run(w.moments));
  return w;
}

}  // namespace week_of_crashes
