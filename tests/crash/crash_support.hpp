// SPDX-License-Identifier: BSL-1.0
// What the crash tests share: an event stream where a regression is visible, the four kinds of
// sink the matrix runs, a sink wrapper that keeps a journal of what became durable, a fault
// injector, and reference models that say — from the log and the policy's own step list, never
// from the pipeline — what a crash at a given point must leave behind.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/orders.hpp"

namespace crash {

namespace co = commit_order;
using test_support::manual_clock;
using test_support::store;

// ---- events -----------------------------------------------------------------------------------

/// One update of an account. `seq` counts the account's updates in log order (0, 1, 2, ...), so
/// a row whose seq goes down was overwritten by an older event: a regression, made observable.
/// (Not the shared order_event: its totals cannot tell an older row from a newer one.)
struct account_event {
  std::int64_t account = 0;
  std::int64_t seq = 0;
  friend bool operator==(const account_event&, const account_event&) = default;
};

using account_key = co::key<&account_event::account>;
using event_log = co::memory::log<account_event>;

/// `n` events over `accounts` accounts, assigned by a fixed LCG (Knuth's MMIX constants) so the
/// pattern is irregular but identical in every run.
inline event_log make_event_log(std::int64_t n, std::int64_t accounts) {
  event_log log;
  std::vector<std::int64_t> next_seq(static_cast<std::size_t>(accounts), 0);
  std::uint64_t x = 0x2545F4914F6CDD1DULL;
  for (std::int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto a = static_cast<std::int64_t>((x >> 33) % static_cast<std::uint64_t>(accounts));
    log.append(account_event{a, next_seq[static_cast<std::size_t>(a)]++});
  }
  return log;
}

// ---- the sinks the matrix runs ----------------------------------------------------------------

/// Keyed upsert, last writer wins.
using idempotent_table =
    co::memory::table<account_event, account_key, co::capabilities<co::Idempotent>>;
/// Keyed upsert that only wins with a newer source offset.
using guarded_table = co::memory::table<account_event, account_key,
                                        co::capabilities<co::Idempotent, co::OffsetGuarded>>;
/// Keyed, guarded, with the position in the same transaction.
using transactional_table =
    co::memory::table<account_event, account_key,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>;
/// Plain append that declares a replay harmless (a set of tombstones, say): duplicates are
/// allowed, counted by offset.
using harmless_table =
    co::memory::table<account_event, co::no_key, co::capabilities<co::DuplicatesHarmless>>;

enum class sink_kind { idempotent, guarded, transactional, harmless };

template <class Table>
inline constexpr sink_kind kind_of_v = [] {
  if constexpr (std::is_same_v<Table, idempotent_table>) {
    return sink_kind::idempotent;
  } else if constexpr (std::is_same_v<Table, guarded_table>) {
    return sink_kind::guarded;
  } else if constexpr (std::is_same_v<Table, transactional_table>) {
    return sink_kind::transactional;
  } else {
    static_assert(std::is_same_v<Table, harmless_table>);
    return sink_kind::harmless;
  }
}();

inline const char* name_of(sink_kind k) {
  switch (k) {
    case sink_kind::idempotent:
      return "idempotent";
    case sink_kind::guarded:
      return "idempotent+offset-guarded";
    case sink_kind::transactional:
      return "transactional+offset-guarded";
    case sink_kind::harmless:
      return "duplicates-harmless append";
  }
  return "?";
}

template <class Table>
inline constexpr bool keyed_v = kind_of_v<Table> != sink_kind::harmless;
template <class Table>
inline constexpr bool guarded_v =
    kind_of_v<Table> == sink_kind::guarded || kind_of_v<Table> == sink_kind::transactional;

// ---- policies and triggers, by name ---------------------------------------------------------

enum class policy_kind { at_most_once, at_least_once, transactional_position };
enum class trigger_kind { every_record, every_batch, auto_commit };

template <class P>
inline constexpr policy_kind policy_kind_of_v = [] {
  if constexpr (std::is_same_v<P, co::AtMostOnce<typename P::trigger>>) {
    return policy_kind::at_most_once;
  } else if constexpr (std::is_same_v<P, co::AtLeastOnce<typename P::trigger>>) {
    return policy_kind::at_least_once;
  } else {
    static_assert(std::is_same_v<P, co::TransactionalPosition<typename P::trigger>>);
    return policy_kind::transactional_position;
  }
}();

template <class P>
inline constexpr trigger_kind trigger_kind_of_v = [] {
  if constexpr (std::is_same_v<typename P::trigger, co::EveryRecord>) {
    return trigger_kind::every_record;
  } else if constexpr (std::is_same_v<typename P::trigger, co::EveryBatch>) {
    return trigger_kind::every_batch;
  } else {
    return trigger_kind::auto_commit;
  }
}();

template <class P>
std::string policy_name() {
  return std::string(P::name) + "<" + std::string(P::trigger::name) + ">";
}

/// The legality table (R1-R5, docs/legality.md), written out by hand for the four sinks: the set
/// the crash tests must run. It is compared with what `can_make_pipeline` accepts, so a rule that
/// drifts from the design shows up as a mismatch, not as a silently smaller matrix.
constexpr bool design_allows(policy_kind p, trigger_kind t, sink_kind s) {
  const bool idempotent = s != sink_kind::harmless;
  const bool guarded = s == sink_kind::guarded || s == sink_kind::transactional;
  const bool transactional = s == sink_kind::transactional;
  const bool harmless = s == sink_kind::harmless;
  if (t == trigger_kind::auto_commit && p != policy_kind::at_most_once)
    return false;  // R2
  if (t == trigger_kind::auto_commit && !idempotent)
    return false;  // R1
  if (p == policy_kind::at_least_once && !idempotent && !harmless)
    return false;  // R3
  if (p == policy_kind::transactional_position && !transactional)
    return false;  // R4
  if (p == policy_kind::transactional_position && !guarded)
    return false;  // R5
  return true;
}

// ---- a journal of what became durable ---------------------------------------------------------

/// Per source offset, how many times a write of it became durable (applied or absorbed by the
/// offset guard); plus a watch on every key's sequence number.
struct journal {
  std::vector<int> delivered;   ///< durable deliveries per offset (index = offset)
  std::size_t absorbed = 0;     ///< durable deliveries the offset guard kept out
  std::size_t regressions = 0;  ///< a key's durable row went back to an older seq
  std::map<std::int64_t, std::int64_t> high_water;  ///< account -> highest durable seq seen

  explicit journal(std::size_t offsets = 0) : delivered(offsets, 0) {}

  void deliver(co::offset o, co::write_outcome out) {
    const auto i = static_cast<std::size_t>(o.value());
    if (i >= delivered.size())
      delivered.resize(i + 1, 0);
    ++delivered[i];
    if (out == co::write_outcome::absorbed)
      ++absorbed;
  }
  void watch(std::int64_t account, std::int64_t seq_now) {
    auto [it, fresh] = high_water.try_emplace(account, seq_now);
    if (!fresh) {
      if (seq_now < it->second)
        ++regressions;
      else
        it->second = seq_now;
    }
  }
};

/// Wraps `Inner` (a memory::table) and writes the journal: a non-transactional write is durable
/// when apply returns; a transactional one when commit returns, and never if rolled back. After
/// every durable change it checks that no key's seq went backwards. Everything it does not
/// watch is forwarded as it is (memory::forwarding_sink).
template <class Inner>
class journal_sink : public co::memory::forwarding_sink<Inner&> {
  using base = co::memory::forwarding_sink<Inner&>;

 public:
  journal_sink(Inner& inner, journal& j) : base(inner), journal_(&j) {}

  co::write_outcome apply(co::offset o, const typename Inner::row_type& row) {
    const co::write_outcome out = this->inner().apply(o, row);
    if (in_tx_) {
      staged_.push_back(staged{o, out, row.account});
    } else {
      journal_->deliver(o, out);
      watch(row.account);
    }
    return out;
  }

  void begin() requires co::transactional_sink<Inner> {
    this->inner().begin();
    in_tx_ = true;
    staged_.clear();
  }
  void commit() requires co::transactional_sink<Inner> {
    this->inner().commit();
    in_tx_ = false;
    for (const staged& s : staged_) {
      journal_->deliver(s.o, s.out);
      watch(s.account);
    }
    staged_.clear();
  }
  void rollback() requires co::transactional_sink<Inner> {
    this->inner().rollback();
    in_tx_ = false;
    // The rollback must restore the committed rows, never something older than them.
    for (const staged& s : staged_)
      watch(s.account);
    staged_.clear();
  }

 private:
  struct staged {
    co::offset o;
    co::write_outcome out;
    std::int64_t account;
  };

  void watch(std::int64_t account) {
    if constexpr (keyed_v<Inner>) {
      if (const auto* r = this->inner().find(account_key{}(account_event{account, 0})))
        journal_->watch(account, r->row.seq);
    }
  }

  journal* journal_;
  std::vector<staged> staged_;
  bool in_tx_ = false;
};

// ---- the fault injector -----------------------------------------------------------------------

inline constexpr std::size_t never = static_cast<std::size_t>(-1);

/// Counts fault points (optionally recording them), crashes at the n-th, and — for AutoCommit —
/// moves the manual clock by one interval at every k-th point, so the timer fires at boundaries
/// that vary with k.
struct scenario_faults {
  std::vector<co::fault_point>* trace = nullptr;
  std::size_t crash_at = never;
  std::size_t seen = 0;
  std::size_t clock_every = 0;
  std::chrono::milliseconds interval{5000};

  void at(const co::fault_point& p) {
    const std::size_t n = seen++;
    if (trace != nullptr)
      trace->push_back(p);
    if (clock_every != 0 && n % clock_every == clock_every - 1)
      manual_clock::advance(interval);
    if (n == crash_at)
      throw co::injected_crash{p};
  }
};

// ---- reference models ------------------------------------------------------------------------

/// One unit of work as the design defines it: [begin, end) inside the batch that ends at
/// `batch_end` (a batch, one split of it, or one record under EveryRecord).
struct unit_ref {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t batch_begin = 0;
  std::int64_t batch_end = 0;
  [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(end - begin); }
};

/// The units a consumer starting at `start` cuts [start, end) into: batches of `batch`, each
/// split into units of `split` (0: none), or single records when `per_record`.
inline std::vector<unit_ref> reference_units(std::int64_t start, std::int64_t end,
                                             std::size_t batch, std::size_t split,
                                             bool per_record) {
  std::vector<unit_ref> units;
  for (std::int64_t pos = start; pos < end;) {
    const std::int64_t n = std::min<std::int64_t>(static_cast<std::int64_t>(batch), end - pos);
    std::int64_t unit = n;
    if (per_record)
      unit = 1;
    else if (split != 0)
      unit = std::min<std::int64_t>(unit, static_cast<std::int64_t>(split));
    for (std::int64_t done = 0; done < n; done += unit)
      units.push_back(unit_ref{pos + done, pos + std::min(n, done + unit), pos, pos + n});
    pos += n;
  }
  return units;
}

/// Where, in a step list, the write and the position become durable — read off the list here,
/// independently of the library's own analysis.
struct step_model {
  std::vector<co::step_kind> kinds;
  std::size_t write_at = 0;
  std::size_t write_durable_at = 0;
  std::size_t position_durable_at = 0;  ///< unused when `timer`
  bool timer = false;
  bool transactional = false;
  /// The write step is a transaction of its own: the policy has no Begin, the sink is
  /// Transactional (a write step over a transactional sink is one transaction: docs/reference.md,
  /// "Run-time behaviour worth knowing").
  bool write_in_own_transaction = false;
};

template <std::size_t N>
step_model model_of(const std::array<co::step_kind, N>& kinds, bool sink_transactional) {
  step_model m;
  m.kinds.assign(kinds.begin(), kinds.end());
  std::optional<std::size_t> begin_at, store_at, commit_at;
  for (std::size_t i = 0; i < N; ++i) {
    switch (kinds[i]) {
      case co::step_kind::write:
        m.write_at = i;
        break;
      case co::step_kind::commit_position:
        m.position_durable_at = i;
        break;
      case co::step_kind::timed_commit_position:
        m.timer = true;
        break;
      case co::step_kind::begin:
        begin_at = i;
        break;
      case co::step_kind::store_position:
        store_at = i;
        break;
      case co::step_kind::commit:
        commit_at = i;
        break;
      case co::step_kind::poll:
        break;
    }
  }
  m.transactional = begin_at.has_value();
  // Inside a transaction nothing is durable before its commit.
  const bool write_inside =
      begin_at && commit_at && *begin_at < m.write_at && m.write_at < *commit_at;
  m.write_durable_at = write_inside ? *commit_at : m.write_at;
  m.write_in_own_transaction = !m.transactional && sink_transactional;
  if (store_at)
    m.position_durable_at = *commit_at;
  return m;
}

/// A fault point as the reference predicts it.
struct point_ref {
  co::fault_point::kind where = co::fault_point::kind::after_step;
  co::step_kind step = co::step_kind::poll;
  std::size_t index = 0;
  std::size_t row = 0;
  std::size_t unit = 0;  ///< index into the reference units
};

/// Every gap of every unit: after each step of the policy's list, and after each row of the
/// write, in order.
inline std::vector<point_ref> reference_points(const step_model& m,
                                               const std::vector<unit_ref>& units) {
  std::vector<point_ref> pts;
  using k = co::fault_point::kind;
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (std::size_t i = 0; i < m.kinds.size(); ++i) {
      if (m.kinds[i] == co::step_kind::write) {
        for (std::size_t r = 1; r <= units[u].size(); ++r)
          pts.push_back(point_ref{k::after_row, m.kinds[i], i, r, u});
      }
      pts.push_back(point_ref{k::after_step, m.kinds[i], i, 0, u});
    }
  }
  return pts;
}

inline bool matches(const co::fault_point& got, const point_ref& want, const unit_ref& unit) {
  return got.where == want.where && got.step == want.step && got.step_index == want.index &&
         got.row == want.row && got.unit_end == co::position{unit.end} && got.unit == want.unit;
}

/// What a crash at `q` has made durable of its unit: rows written, and whether the position
/// already covers the unit. (Not meaningful for the position of a timer policy.)
struct crash_effect {
  std::size_t rows_durable = 0;
  bool position_durable = false;
};

inline crash_effect effect_of(const step_model& m, const point_ref& q, const unit_ref& unit) {
  crash_effect e;
  if (q.where == co::fault_point::kind::after_row) {
    // Rows are durable one by one only when no transaction holds them back.
    e.rows_durable = m.write_durable_at == m.write_at && !m.write_in_own_transaction ? q.row : 0;
    e.position_durable = !m.timer && m.position_durable_at < m.write_at;
  } else {
    e.rows_durable = q.index >= m.write_durable_at ? unit.size() : 0;
    e.position_durable = !m.timer && q.index >= m.position_durable_at;
  }
  return e;
}

/// The sink state "last event per key wins" over the log, skipping `skipped` offsets.
inline std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> last_per_account(
    const event_log& log, const std::vector<bool>& skipped) {
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> m;  // account -> (offset, seq)
  for (const auto& r : log.records()) {
    const auto i = static_cast<std::size_t>(r.source_offset.value());
    if (i < skipped.size() && skipped[i])
      continue;
    m[r.event.account] = {r.source_offset.value(), r.event.seq};
  }
  return m;
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

// ---- type lists ------------------------------------------------------------------------------

template <class... T>
struct type_list {};

template <class... T, class F>
void for_each_type(type_list<T...>, F&& f) {
  (f(std::type_identity<T>{}), ...);
}

using all_policies =
    type_list<co::AtMostOnce<co::EveryRecord>, co::AtMostOnce<co::EveryBatch>,
              co::AtMostOnce<co::AutoCommit>, co::AtLeastOnce<co::EveryRecord>,
              co::AtLeastOnce<co::EveryBatch>, co::AtLeastOnce<co::AutoCommit>,
              co::TransactionalPosition<co::EveryRecord>, co::TransactionalPosition<co::EveryBatch>,
              co::TransactionalPosition<co::AutoCommit>>;
using all_tables = type_list<idempotent_table, guarded_table, transactional_table, harmless_table>;

/// The pipeline over the crash tests' log, with the options its policy uses: a position store
/// when the executed order keeps the position outside the sink, and the clock only where a
/// timer reads it (rules S18 and S19 refuse an option the configuration never uses).
namespace detail {
template <class T>
inline constexpr bool is_clock_option = false;
template <class C>
inline constexpr bool is_clock_option<co::with_clock<C>> = true;

template <class Policy, class Option>
using kept_option =
    std::conditional_t<is_clock_option<Option> && !co::policy_facts_v<Policy>.position_on_timer,
                       std::tuple<>, std::tuple<Option>>;

template <class Policy, class Sink, class Options>
struct pipeline_of;
template <class Policy, class Sink, class... Options>
struct pipeline_of<Policy, Sink, std::tuple<Options...>> {
  using type = co::pipeline<event_log, Sink, Policy, Options...>;
  static constexpr bool legal = co::can_make_pipeline<event_log, Sink, Policy, Options...>;
};

template <class Policy, class Sink, class... Options>
using pipeline_of_t = pipeline_of<
    Policy, Sink,
    decltype(std::tuple_cat(
        std::declval<std::conditional_t<co::policy_facts_v<Policy>.uses_position_store,
                                        std::tuple<co::with_store<store>>, std::tuple<>>>(),
        std::declval<kept_option<Policy, Options>>()...))>;
}  // namespace detail

template <class Policy, class Sink, class... Options>
using pipeline_for = typename detail::pipeline_of_t<Policy, Sink, Options...>::type;

template <class Policy, class Sink, class... Options>
inline constexpr bool legal_v = detail::pipeline_of_t<Policy, Sink, Options...>::legal;

}  // namespace crash
