// SPDX-License-Identifier: BSL-1.0
// commit_order/steps.hpp — the vocabulary of steps a policy orders, and what an order implies.
//
// A policy is nothing but an ordered list of these steps. Whether a crash between two of them
// loses a record, replays it, or neither, follows from the order alone: it is computed here,
// never declared, so a user-defined order is judged by the same arithmetic as the built-ins.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace commit_order {

enum class step_kind {
  poll,                   ///< read a batch from the source
  write,                  ///< apply the unit's rows to the sink
  commit_position,        ///< make the position durable in a separate position store
  begin,                  ///< open a sink transaction
  store_position,         ///< write the position inside the open sink transaction
  commit,                 ///< commit the sink transaction: everything inside becomes durable
  timed_commit_position,  ///< a timer commits the last polled position, whenever it fires
};

struct Poll final {
  static constexpr step_kind kind = step_kind::poll;
  static constexpr std::string_view name = "poll";
};
struct Write final {
  static constexpr step_kind kind = step_kind::write;
  static constexpr std::string_view name = "write";
};
struct CommitPosition final {
  static constexpr step_kind kind = step_kind::commit_position;
  static constexpr std::string_view name = "commit position";
};
struct Begin final {
  static constexpr step_kind kind = step_kind::begin;
  static constexpr std::string_view name = "begin";
};
struct StorePosition final {
  static constexpr step_kind kind = step_kind::store_position;
  static constexpr std::string_view name = "store position";
};
struct Commit final {
  static constexpr step_kind kind = step_kind::commit;
  static constexpr std::string_view name = "commit";
};
/// Not a step the loop runs in order: a timer that may fire in any gap (enable.auto.commit).
struct TimedCommitPosition final {
  static constexpr step_kind kind = step_kind::timed_commit_position;
  static constexpr std::string_view name = "commit position on a timer";
};

/// An ordered list of steps: the protocol of one unit of work.
template <class... Steps>
struct step_list final {
  static constexpr std::size_t size = sizeof...(Steps);
  static constexpr std::array<step_kind, sizeof...(Steps)> kinds{Steps::kind...};
  static constexpr std::array<std::string_view, sizeof...(Steps)> names{Steps::name...};
};

/// What a step order implies, computed once at compile time.
struct step_order_facts final {
  bool well_formed = false;
  std::string_view problem{};           ///< why an order is malformed (empty when well formed)
  std::size_t write_durable_at = 0;     ///< index of the step at which the write is durable
  std::size_t position_durable_at = 0;  ///< index of the step at which the position is durable
  bool position_on_timer = false;       ///< the position moves independently of the write
  bool position_in_sink = false;        ///< the position lives in the sink's transaction
  bool uses_position_store = false;     ///< the position lives in a separate store
  bool uses_transaction = false;
  bool write_with_position = false;  ///< write and position commit in one transaction

  /// A crash can leave the position past a record whose write is not durable.
  [[nodiscard]] constexpr bool may_lose() const {
    return position_on_timer || position_durable_at < write_durable_at;
  }
  /// A crash can leave a durable write behind a position that will read it again.
  [[nodiscard]] constexpr bool may_duplicate() const {
    return position_on_timer || write_durable_at < position_durable_at;
  }
};

namespace detail {
template <std::size_t N>
constexpr step_order_facts analyse(const std::array<step_kind, N>& k) {
  step_order_facts f{};
  auto fail = [&f](std::string_view why) {
    f.well_formed = false;
    f.problem = why;
    return f;
  };
  if (N == 0 || k[0] != step_kind::poll)
    return fail("the first step must be Poll");

  std::size_t polls = 0, writes = 0, positions = 0, begins = 0, commits = 0;
  std::size_t write_at = 0, position_at = 0, commit_at = 0;
  bool in_tx = false, write_in_tx = false, position_in_tx = false;
  for (std::size_t i = 0; i < N; ++i) {
    switch (k[i]) {
      case step_kind::poll:
        ++polls;
        break;
      case step_kind::write:
        ++writes;
        write_at = i;
        write_in_tx = in_tx;
        break;
      case step_kind::commit_position:
      case step_kind::timed_commit_position:
        ++positions;
        position_at = i;
        break;
      case step_kind::store_position:
        if (!in_tx)
          return fail("StorePosition must sit between Begin and Commit");
        ++positions;
        position_at = i;
        position_in_tx = true;
        break;
      case step_kind::begin:
        if (in_tx)
          return fail("transactions do not nest: Begin inside Begin");
        ++begins;
        in_tx = true;
        break;
      case step_kind::commit:
        if (!in_tx)
          return fail("Commit without a Begin before it");
        ++commits;
        in_tx = false;
        commit_at = i;
        break;
    }
  }
  if (polls != 1)
    return fail("exactly one Poll per unit of work");
  if (writes != 1)
    return fail("exactly one Write per unit of work");
  if (positions != 1) {
    return fail("exactly one position step (CommitPosition, StorePosition or TimedCommitPosition)");
  }
  if (in_tx)
    return fail("a Begin without its Commit");
  if (begins > 1)
    return fail("at most one sink transaction per unit of work");

  f.well_formed = true;
  f.uses_transaction = begins == 1;
  f.position_on_timer = k[position_at] == step_kind::timed_commit_position;
  f.position_in_sink = position_in_tx;
  f.uses_position_store = !position_in_tx;
  // Inside a transaction nothing is durable until its Commit step.
  f.write_durable_at = write_in_tx ? commit_at : write_at;
  f.position_durable_at = position_in_tx ? commit_at : position_at;
  f.write_with_position = write_in_tx && position_in_tx;
  return f;
}
}  // namespace detail

/// The facts of a step list.
template <class Steps>
inline constexpr step_order_facts facts_of_v = detail::analyse(Steps::kinds);

}  // namespace commit_order
