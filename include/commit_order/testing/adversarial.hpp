// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/adversarial.hpp — the conformance kit's adversarial tier: what a hostile
// reviewer tries on an adapter, as checks any adapter (and a user's own) can run.
//
//   auto r = commit_order::testing::run_adversarial<my_hostile_fixture>("my sink");
//   CHECK(r.passed());
//   CHECK(r.not_run.empty());
//
// The fixture is a conformance fixture (fixture.hpp) with any of these members; a check whose
// member is missing is listed in the report's `not_run`, never passed:
//
//   std::vector<event_type> hostile_events();   (static or a member; any range of events)
//       apply order: events whose values are hostile to the sink's column types (see
//       hostile_values.hpp: NaN, -0.0, infinities, the integer limits, empty text, NUL bytes
//       and invalid UTF-8, long text), each after an ordinary record of its key, and rows
//       constrained by each other where the fixture's table declares such constraints. The
//       kit runs them one record per unit, then in units of every other size (so every unit
//       boundary, and every statement boundary of a sink that chunks a unit, falls between
//       every pair of records), under each legal policy, dead-lettering what fails
//       (dead_letter<0>). One record per unit must leave exactly the rows that applying the
//       records not dead-lettered in offset order leaves (a keyed sink: the last of each key);
//       every run must leave the same rows and dead-letter the same records as one record per
//       unit; each row read back must be the row its record makes.
//   bool same_key(const event_type&, const event_type&);   (static or a member)
//       which events share a row of a keyed sink, as the database compares keys; without it
//       only the runs' agreement is checked (listed in not_run).
//   bool same_row(const row_type&, const row_type&);   (static or a member)
//       how rows compare when `==` cannot (a NaN column); `==` otherwise.
//   using sibling_type = ...;  sibling_type(F&);
//       shared storage: a second consumer over the same storage — its own source and data
//       table, every option left at its default, as a new user's second pipeline would. After
//       the first consumer ran to the end of its log, the second must apply every record of
//       its own, or be refused (position_bound_elsewhere) before it skipped any; started
//       together, the second's commit must not move the first's position.
//   static std::vector<std::pair<std::string, std::string>> owned_properties();
//   static std::pair<std::string, std::string> accepted_property();
//   void open_source_with(const std::string& name, const std::string& value);
//       owned properties: every spelling and scope of a setting the library decides for the
//       source (a prefix, another scope, another case); each must be refused when the source
//       is opened with it, and the accepted property (one the user decides) must open: the
//       control that the opener can succeed at all.
//
// report::passed() counts failures; what did not run is in report::not_run.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/adapters/memory/dead_letters.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"
#include "commit_order/pipeline.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/testing/capability_checks.hpp"
#include "commit_order/testing/detail/scenario.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing {

namespace detail {

template <class F>
concept static_hostile_events = requires {
  { F::hostile_events() } -> std::ranges::input_range;
};
template <class F>
concept has_hostile_events = static_hostile_events<F> || requires(F& f) {
  { f.hostile_events() } -> std::ranges::input_range;
};
/// A second consumer's fixture: every member a conformance fixture has, made from the first.
template <class F>
concept has_sibling = requires {
  typename F::sibling_type;
}
&&fixture_members<typename F::sibling_type>&& std::constructible_from<typename F::sibling_type, F&>;
template <class F>
concept has_owned_properties = requires(F& f, const std::string& s) {
  {
    F::owned_properties()
    } -> std::convertible_to<std::vector<std::pair<std::string, std::string>>>;
  f.open_source_with(s, s);
};
template <class F>
concept has_accepted_property = requires {
  { F::accepted_property() } -> std::convertible_to<std::pair<std::string, std::string>>;
};

/// The fixture's hostile events, from a static or a member hostile_events() (a fixture is made
/// for the member form, and closed).
template <class F>
std::vector<typename F::event_type> hostile_events_of() {
  std::vector<typename F::event_type> out;
  auto copy = [&](auto&& events) {
    for (auto&& e : events)
      out.push_back(e);
  };
  if constexpr (static_hostile_events<F>) {
    copy(F::hostile_events());
  } else {
    F f;
    copy(f.hostile_events());
    f.close();
  }
  return out;
}

/// How the fixture compares rows (`same_row`) and keys (`same_key`), static or member; rows
/// compare with `==` where it has no same_row. A member form is called on `probe`, a fixture
/// made for it.
template <class F>
struct comparisons final {
  using event_type = typename F::event_type;
  using row_type = sink_row_t<typename F::sink_type>;
  static constexpr bool static_same_row = requires(const row_type& a) { F::same_row(a, a); };
  static constexpr bool member_same_row = requires(F & f, const row_type& a) { f.same_row(a, a); };
  static constexpr bool static_same_key = requires(const event_type& a) {
    { F::same_key(a, a) } -> std::convertible_to<bool>;
  };
  static constexpr bool member_same_key = requires(F & f, const event_type& a) {
    { f.same_key(a, a) } -> std::convertible_to<bool>;
  };
  static constexpr bool has_same_key = static_same_key || member_same_key;

  std::optional<F> probe;
  comparisons() {
    if constexpr ((member_same_row && !static_same_row) || (member_same_key && !static_same_key))
      probe.emplace();
  }
  comparisons(const comparisons&) = delete;
  comparisons& operator=(const comparisons&) = delete;
  ~comparisons() {
    if (probe)
      probe->close();
  }

  bool same_row(const row_type& a, const row_type& b) {
    if constexpr (static_same_row)
      return F::same_row(a, b);
    else if constexpr (member_same_row)
      return probe->same_row(a, b);
    else
      return a == b;
  }
  bool same_key(const event_type& a, const event_type& b) {
    if constexpr (static_same_key)
      return F::same_key(a, b);
    else if constexpr (member_same_key)
      return probe->same_key(a, b);
    else
      return false;
  }
};

/// The policies the adversarial tier runs (a trigger that commits per unit: the unit is what it
/// varies).
using adversarial_policies =
    type_list<AtMostOnce<EveryBatch>, AtLeastOnce<EveryBatch>, TransactionalPosition<EveryBatch>>;

/// The pipeline over fixture F's own parts (no recording sink, no faults: the tier runs the
/// adapter as a user does), with a store where the policy keeps its position apart, and
/// dead-lettering when `DeadLetters`.
template <class F, class Policy, bool DeadLetters>
struct plain_pipeline final {
  using traits = fixture_traits<F>;
  using event_type = typename traits::event_type;
  using dead_letters_type =
      memory::dead_letters<event_type, declared_durability_t<typename traits::sink_type, Volatile>>;
  static constexpr bool uses_store = policy_facts_v<Policy>.uses_position_store;
  using options = decltype(std::tuple_cat(
      std::declval<
          keep_if<uses_store && traits::has_store, with_store<typename traits::store_type>>>(),
      std::declval<keep_if<names_transform<F>, with_transform<typename traits::transform_type>>>(),
      std::declval<keep_if<DeadLetters, with_error_handling<dead_letter<0>>>>(),
      std::declval<keep_if<DeadLetters, with_dead_letters<dead_letters_type>>>()));
  using of = pipeline_of<typename traits::source_type, typename traits::sink_type, Policy, options>;
  static constexpr bool legal = of::legal;
  using type = typename of::type;

  static type make(F& f, dead_letters_type& letters, const settings& s) {
    if constexpr (uses_store && DeadLetters)
      return type(f.source(), f.sink(), f.store(), letters, s);
    else if constexpr (uses_store)
      return type(f.source(), f.sink(), f.store(), s);
    else if constexpr (DeadLetters)
      return type(f.source(), f.sink(), letters, s);
    else
      return type(f.source(), f.sink(), s);
  }
};

/// What one run over the hostile events left: the rows (by source offset), the records
/// dead-lettered, the position, or the error that stopped it.
template <class Row>
struct run_result {
  std::vector<observed_row<Row>> rows;
  std::vector<std::int64_t> dead;
  std::optional<position> end;
  std::string error;
};

template <class F, class Policy>
run_result<sink_row_t<typename F::sink_type>> run_hostile(
    const std::vector<typename F::event_type>& events, std::size_t batch) {
  using pp = plain_pipeline<F, Policy, true>;
  run_result<sink_row_t<typename F::sink_type>> out;
  F f;
  f.create_log(std::span<const typename F::event_type>(events));
  typename pp::dead_letters_type letters;
  try {
    auto p = pp::make(f, letters, settings{.batch_size = batch});
    p.run();
    out.end = p.committed_position();
  } catch (...) {
    out.error = describe(std::current_exception());
  }
  for (const auto& l : letters.letters())
    out.dead.push_back(l.source_offset.value());
  std::sort(out.dead.begin(), out.dead.end());
  f.close();
  out.rows = f.rows();
  // A keyed sink's rows have no order of their own; an append sink's come as the fixture reads
  // them (in the order they were stored), which must be offset order.
  if constexpr (has_capability_v<typename F::sink_type, Idempotent>)
    std::sort(out.rows.begin(), out.rows.end(),
              [](const auto& a, const auto& b) { return a.source_offset < b.source_offset; });
  return out;
}

inline std::string show_offsets(const std::vector<std::int64_t>& v) {
  std::string s = "{";
  for (const auto o : v)
    s += (s.size() > 1 ? ", " : "") + std::to_string(o);
  return s + "}";
}

template <class Row>
std::string show_row_offsets(const std::vector<observed_row<Row>>& rows) {
  std::vector<std::int64_t> v;
  for (const auto& r : rows)
    v.push_back(r.source_offset.value());
  return show_offsets(v);
}

/// How many of the tier's policies are legal over F's parts (with dead letters or without).
template <class F, bool DeadLetters, class... P>
constexpr int count_legal(type_list<P...>) {
  return ((plain_pipeline<F, P, DeadLetters>::legal ? 1 : 0) + ... + 0);
}
template <class F, bool DeadLetters>
constexpr int legal_policies() {
  return count_legal<F, DeadLetters>(adversarial_policies{});
}

/// The offsets whose rows one record per unit must leave: every record not dead-lettered, in
/// offset order; in a keyed sink only the last such record of each key.
template <class F, class Events>
std::vector<std::int64_t> expected_offsets(const Events& events,
                                           const std::vector<std::int64_t>& dead,
                                           comparisons<F>& cmp) {
  constexpr bool keyed = has_capability_v<typename F::sink_type, Idempotent>;
  const auto kept = [&](std::size_t i) {
    return !std::binary_search(dead.begin(), dead.end(), static_cast<std::int64_t>(i));
  };
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (!kept(i))
      continue;
    bool last_of_key = true;
    if constexpr (keyed)
      for (std::size_t j = i + 1; last_of_key && j < events.size(); ++j)
        last_of_key = !(kept(j) && cmp.same_key(events[i], events[j]));
    if (last_of_key)
      out.push_back(static_cast<std::int64_t>(i));
  }
  return out;
}

template <class F>
void check_apply_order(report& r) {
  for_each_type(adversarial_policies{}, [&]<class P>(std::type_identity<P>) {
    if constexpr (!plain_pipeline<F, P, true>::legal)
      r.not_run.push_back("apply order under " + policy_name<P>() +
                          ": not legal over the fixture's parts");
  });
  if constexpr (legal_policies<F, true>() == 0) {
    r.not_run.push_back("apply order: no policy is legal over the fixture's parts");
    return;
  } else {
    constexpr bool keyed = has_capability_v<typename F::sink_type, Idempotent>;
    using traits = fixture_traits<F>;
    comparisons<F> cmp;
    if (keyed && !comparisons<F>::has_same_key)
      r.not_run.push_back(
          "apply order, the rows one record per unit must leave: the fixture has no "
          "same_key(a, b) (which events share a row of the keyed sink); only the runs' agreement "
          "was checked");
    check_report& c = r.add("apply order: any unit size leaves what one record per unit leaves");
    const std::vector<typename F::event_type> events = hostile_events_of<F>();
    const std::size_t n = events.size();
    if (n == 0) {
      scenario(c, "hostile events", [&](const fail_fn& fail) {
        fail("hostile_events() returned none: nothing was tried");
      });
      return;
    }
    for_each_type(adversarial_policies{}, [&]<class P>(std::type_identity<P>) {
      if constexpr (plain_pipeline<F, P, true>::legal) {
        const std::string policy = policy_name<P>();
        run_result<sink_row_t<typename F::sink_type>> alone;
        scenario(c, policy + ", one record per unit", [&](const fail_fn& fail) {
          alone = run_hostile<F, P>(events, 1);
          c.note(policy + ": one record per unit left " + std::to_string(alone.rows.size()) +
                 " rows of " + std::to_string(n) + " records, dead-lettered " +
                 show_offsets(alone.dead) +
                 (alone.error.empty() ? "" : ", stopped: " + alone.error));
          if (!alone.error.empty())
            fail("stopped: " + alone.error);
          if (!alone.end || alone.end->value() != static_cast<std::int64_t>(n))
            fail("the position is not past the last record");
          std::vector<std::int64_t> held;
          for (const auto& row : alone.rows) {
            const auto o = static_cast<std::size_t>(row.source_offset.value());
            held.push_back(row.source_offset.value());
            if (row.source_offset.value() < 0 || o >= n) {
              fail("a row carries offset " + std::to_string(row.source_offset.value()) +
                   ", outside the log");
              continue;
            }
            if (!cmp.same_row(row.row, traits::row_of(events[o])))
              fail("the row of record " + std::to_string(o) +
                   " read back is not the row the record makes (a value changed on the way)");
          }
          if (keyed && !comparisons<F>::has_same_key)
            return;
          const std::vector<std::int64_t> want = expected_offsets<F>(events, alone.dead, cmp);
          if (held != want)
            fail("the sink holds the rows of " + show_offsets(held) + ", applying the records " +
                 "not dead-lettered in offset order leaves " + show_offsets(want) +
                 (keyed ? " (the last record of each key)"
                        : " (one row per record, in offset order)") +
                 ": rows lost, duplicated, collapsed or reordered");
        });
        for (std::size_t b = 2; b <= n; ++b) {
          scenario(c, policy + ", units of " + std::to_string(b), [&](const fail_fn& fail) {
            const auto got = run_hostile<F, P>(events, b);
            if (got.error != alone.error)
              fail("stopped with '" + got.error + "', one record per unit with '" + alone.error +
                   "'");
            if (got.end != alone.end)
              fail("the position differs from one record per unit's");
            if (got.dead != alone.dead)
              fail("dead-lettered " + show_offsets(got.dead) + ", one record per unit " +
                   show_offsets(alone.dead) + " (a healthy record blamed, or a failure hidden)");
            bool same = got.rows.size() == alone.rows.size();
            std::string changed;
            for (std::size_t i = 0; same && i < got.rows.size(); ++i) {
              same = got.rows[i].source_offset == alone.rows[i].source_offset;
              if (same && !cmp.same_row(got.rows[i].row, alone.rows[i].row)) {
                same = false;
                changed = " (the row of record " +
                          std::to_string(got.rows[i].source_offset.value()) + " differs)";
              }
            }
            if (!same)
              fail("the sink holds the rows of " + show_row_offsets(got.rows) +
                   ", one record per unit those of " + show_row_offsets(alone.rows) + changed +
                   " (rows collapsed, reordered or changed)");
          });
        }
      }
    });
  }
}

/// Runs F's or its sibling's parts to the end of their log under `P`; the error, if any.
template <class G, class P>
std::string run_to_end(G& g, std::optional<position>& end) {
  using pp = plain_pipeline<G, P, false>;
  typename pp::dead_letters_type unused;
  try {
    auto p = pp::make(g, unused, settings{.batch_size = 4});
    p.run();
    end = p.committed_position();
    return {};
  } catch (const position_bound_elsewhere& e) {
    return std::string("refused: ") + e.what();
  } catch (...) {
    return "stopped: " + describe(std::current_exception());
  }
}

template <class G>
std::vector<typename G::event_type> kit_events(std::int64_t n, std::int64_t first_key) {
  std::vector<typename G::event_type> out;
  for (std::int64_t i = 0; i < n; ++i)
    out.push_back(G::make_event(first_key + i, 0));
  return out;
}

template <class F>
void check_shared_storage(report& r) {
  using S = typename F::sibling_type;
  if constexpr (legal_policies<F, false>() == 0 || legal_policies<S, false>() == 0) {
    r.not_run.push_back("shared storage: no policy is legal over the fixture's parts");
    return;
  }
  check_report& c = r.add("shared storage: two consumers with default options on one store");
  for_each_type(adversarial_policies{}, [&]<class P>(std::type_identity<P>) {
    if constexpr (plain_pipeline<F, P, false>::legal && plain_pipeline<S, P, false>::legal) {
      const std::string policy = policy_name<P>();
      scenario(c, policy + ", one after the other", [&](const fail_fn& fail) {
        F first;
        const auto mine = kit_events<F>(6, 0);
        first.create_log(std::span<const typename F::event_type>(mine));
        std::optional<position> end;
        if (const std::string e = run_to_end<F, P>(first, end); !e.empty())
          fail("the first consumer " + e);
        S second(first);
        const auto theirs = kit_events<S>(10, 100);
        second.create_log(std::span<const typename S::event_type>(theirs));
        std::optional<position> their_end;
        const std::string e = run_to_end<S, P>(second, their_end);
        second.close();
        const auto rows = second.rows();
        if (e.rfind("refused: ", 0) == 0) {
          if (!rows.empty())
            fail("refused after writing " + std::to_string(rows.size()) + " rows");
        } else if (!e.empty()) {
          fail("the second consumer " + e);
        } else if (rows.size() != theirs.size() || !their_end ||
                   their_end->value() != static_cast<std::int64_t>(theirs.size())) {
          fail("the second consumer applied " + std::to_string(rows.size()) + " of its " +
               std::to_string(theirs.size()) + " records and reached position " +
               (their_end ? std::to_string(their_end->value()) : std::string("none")) +
               ": it started from the first consumer's position");
        }
      });
      scenario(c, policy + ", started together", [&](const fail_fn& fail) {
        F first;
        const auto mine = kit_events<F>(6, 0);
        first.create_log(std::span<const typename F::event_type>(mine));
        S second(first);
        const auto theirs = kit_events<S>(3, 100);
        second.create_log(std::span<const typename S::event_type>(theirs));
        using pf = plain_pipeline<F, P, false>;
        using ps = plain_pipeline<S, P, false>;
        typename pf::dead_letters_type unused_f;
        typename ps::dead_letters_type unused_s;
        auto a = pf::make(first, unused_f, settings{.batch_size = 4});
        auto b = ps::make(second, unused_s, settings{.batch_size = 4});
        try {
          (void)a.recover();
          (void)b.recover();
        } catch (const position_bound_elsewhere&) {
          return;  // refused before anything ran
        }
        a.run();
        try {
          b.run();
        } catch (const position_bound_elsewhere&) {
        }
        first.close();
        second.close();
        F* reopened = &first;
        std::optional<position> stored;
        if constexpr (policy_facts_v<P>.position_in_sink)
          stored = reopened->sink().load_position();
        else
          stored = reopened->store().load();
        if (!stored || stored->value() != static_cast<std::int64_t>(mine.size()))
          fail("the first consumer's stored position is " +
               (stored ? std::to_string(stored->value()) : std::string("none")) + ", not " +
               std::to_string(mine.size()) + ": the second consumer's commit moved it");
      });
    }
  });
}

template <class F>
void check_owned_properties(report& r) {
  const std::vector<std::pair<std::string, std::string>> owned = F::owned_properties();
  if (owned.empty()) {
    r.not_run.push_back("owned properties: owned_properties() lists none");
    return;
  }
  check_report& c = r.add("owned properties: every spelling and scope is refused");
  // A refusal proves something only of an opener that can succeed: a property the library
  // leaves to the user must open.
  if constexpr (has_accepted_property<F>) {
    const std::pair<std::string, std::string> accepted = F::accepted_property();
    scenario(c, "control: " + accepted.first + "=" + accepted.second, [&](const fail_fn& fail) {
      F f;
      try {
        f.open_source_with(accepted.first, accepted.second);
      } catch (...) {
        fail(
            "refused a property the library does not decide (the opener cannot succeed, so "
            "its refusals prove nothing): " +
            describe(std::current_exception()));
      }
    });
  } else {
    r.not_run.push_back(
        "owned properties' control: the fixture has no accepted_property(), so an opener that "
        "always throws would pass");
  }
  // (No structured binding: clang 14 cannot capture one in the scenario's lambda.)
  for (const std::pair<std::string, std::string>& property : owned) {
    scenario(c, property.first + "=" + property.second, [&](const fail_fn& fail) {
      F f;
      try {
        f.open_source_with(property.first, property.second);
      } catch (const std::exception&) {
        return;
      }
      fail("accepted: the source opened with a setting the library decides");
    });
  }
}

}  // namespace detail

/// Runs every adversarial check fixture F has the members for, and lists the others as not run.
template <class F>
report run_adversarial(std::string adapter) {
  static_assert(single_partition_fixture<F>,
                "commit_order::testing: the adversarial tier needs a single-partition fixture "
                "with the members of commit_order/testing/fixture.hpp");
  report r;
  r.adapter = std::move(adapter);
  if constexpr (detail::has_hostile_events<F>)
    detail::check_apply_order<F>(r);
  else
    r.not_run.push_back("apply order: the fixture has no hostile_events()");
  if constexpr (detail::has_sibling<F>)
    detail::check_shared_storage<F>(r);
  else
    r.not_run.push_back("shared storage: the fixture has no sibling_type");
  if constexpr (detail::has_owned_properties<F>)
    detail::check_owned_properties<F>(r);
  else
    r.not_run.push_back("owned properties: the fixture has no owned_properties()");
  return r;
}

}  // namespace commit_order::testing
