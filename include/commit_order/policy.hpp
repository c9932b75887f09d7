// SPDX-License-Identifier: BSL-1.0
// commit_order/policy.hpp — the three policies and their commit triggers.
//
// A policy is a type with two members: `steps`, the order it claims, and `trigger`, how often
// the position moves. The order actually executed is `effective_steps_t<P>`: under AutoCommit
// every position step is replaced by a timer that fires regardless of the write, which is what
// enable.auto.commit does. User-defined policies follow the same shape and are judged by the
// same derivation.
#pragma once

#include <string_view>
#include <type_traits>

#include "commit_order/guarantee.hpp"
#include "commit_order/steps.hpp"

namespace commit_order {

// ---- commit triggers -----------------------------------------------------------------------

/// The unit of work is one record: one position commit per record.
struct EveryRecord final {
  static constexpr std::string_view name = "EveryRecord";
};
/// The unit of work is one batch (or one split of it): one position commit per unit. Default.
struct EveryBatch final {
  static constexpr std::string_view name = "EveryBatch";
};
/// The position is committed by a timer, whether or not the write finished.
struct AutoCommit final {
  static constexpr std::string_view name = "AutoCommit";
};

template <class T>
concept commit_trigger = std::is_same_v<T, EveryRecord> || std::is_same_v<T, EveryBatch> ||
    std::is_same_v<T, AutoCommit>;

// ---- the policies --------------------------------------------------------------------------

/// poll -> commit position -> write. A crash between the last two loses the unit, silently.
template <class Trigger = EveryBatch>
struct AtMostOnce final {
  using trigger = Trigger;
  using steps = step_list<Poll, CommitPosition, Write>;
  static constexpr std::string_view name = "AtMostOnce";
};

/// poll -> write -> commit position. A crash between the last two replays the unit; an
/// idempotent sink absorbs the replay.
template <class Trigger = EveryBatch>
struct AtLeastOnce final {
  using trigger = Trigger;
  using steps = step_list<Poll, Write, CommitPosition>;
  static constexpr std::string_view name = "AtLeastOnce";
};

/// poll -> begin -> write + store position -> commit. No gap: exactly-once in the sink's state.
template <class Trigger = EveryBatch>
struct TransactionalPosition final {
  using trigger = Trigger;
  using steps = step_list<Poll, Begin, Write, StorePosition, Commit>;
  static constexpr std::string_view name = "TransactionalPosition";
};

namespace detail {
// A concept of its own so that the conjunction below stays readable under clang-format 14.
template <class P>
concept names_policy_parts = requires {
  typename P::steps;
  typename P::trigger;
  P::steps::size;
};
}  // namespace detail

/// Anything shaped like a policy: an ordered step list and a commit trigger.
template <class P>
concept policy = detail::names_policy_parts<P> && commit_trigger<typename P::trigger>;

// ---- the executed order --------------------------------------------------------------------

namespace detail {
template <class Trigger, class Step>
struct under_trigger {
  using type = Step;
};
// A timer takes over whichever step moved the position.
template <>
struct under_trigger<AutoCommit, CommitPosition> {
  using type = TimedCommitPosition;
};
template <>
struct under_trigger<AutoCommit, StorePosition> {
  using type = TimedCommitPosition;
};

template <class Trigger, class Steps>
struct apply_trigger;
template <class Trigger, class... Steps>
struct apply_trigger<Trigger, step_list<Steps...>> {
  using type = step_list<typename under_trigger<Trigger, Steps>::type...>;
};
}  // namespace detail

/// The steps a policy really executes, once its trigger is applied.
template <policy P>
using effective_steps_t =
    typename detail::apply_trigger<typename P::trigger, typename P::steps>::type;

/// The guarantee the policy's own order claims (ignoring the trigger).
template <policy P>
using claimed_guarantee_t = guarantee_of_steps_t<typename P::steps>;

/// The guarantee the policy delivers: derived from the executed order.
template <policy P>
using guarantee_t = guarantee_of_steps_t<effective_steps_t<P>>;

/// Facts of the executed order of P.
template <policy P>
inline constexpr step_order_facts policy_facts_v = facts_of_v<effective_steps_t<P>>;

}  // namespace commit_order
