// SPDX-License-Identifier: BSL-1.0
// commit_order/guarantee.hpp — the failure direction of a step order, as a type.
#pragma once

#include <string_view>

#include "commit_order/steps.hpp"

namespace commit_order {

/// Commit before write: a crash in between skips the unit, silently. At-most-once.
struct MayLose final {
  static constexpr bool may_lose = true;
  static constexpr bool may_duplicate = false;
  static constexpr std::string_view name = "may lose (at-most-once)";
};
/// Write before commit: a crash in between replays the unit. At-least-once.
struct MayDuplicate final {
  static constexpr bool may_lose = false;
  static constexpr bool may_duplicate = true;
  static constexpr std::string_view name = "may duplicate (at-least-once)";
};
/// The position moves on a timer, independent of the write: both directions at once.
struct MayLoseAndDuplicate final {
  static constexpr bool may_lose = true;
  static constexpr bool may_duplicate = true;
  static constexpr std::string_view name = "may lose and duplicate (no guarantee)";
};
/// Write and position become durable in one commit: exactly-once in the sink's state.
struct ExactlyOnceInSink final {
  static constexpr bool may_lose = false;
  static constexpr bool may_duplicate = false;
  static constexpr std::string_view name = "exactly-once in the sink's state";
};

/// The guarantee a step list gives, derived from where the write and the position become
/// durable. A malformed list gives no guarantee (and is rejected by rule R0).
namespace detail {
template <bool Lose, bool Duplicate>
struct guarantee_from;
template <>
struct guarantee_from<true, false> {
  using type = MayLose;
};
template <>
struct guarantee_from<false, true> {
  using type = MayDuplicate;
};
template <>
struct guarantee_from<true, true> {
  using type = MayLoseAndDuplicate;
};
template <>
struct guarantee_from<false, false> {
  using type = ExactlyOnceInSink;
};
}  // namespace detail

/// The guarantee a step list gives, derived from where the write and the position become
/// durable. A malformed list gives no guarantee (and is rejected by rule R0).
template <class Steps>
using guarantee_of_steps_t =
    typename detail::guarantee_from<!facts_of_v<Steps>.well_formed || facts_of_v<Steps>.may_lose(),
                                    !facts_of_v<Steps>.well_formed ||
                                        facts_of_v<Steps>.may_duplicate()>::type;

}  // namespace commit_order
