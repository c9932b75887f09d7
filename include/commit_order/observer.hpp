// SPDX-License-Identifier: BSL-1.0
// commit_order/observer.hpp — what a pipeline reports while it runs.
//
// An observer is any type with overloads of one member, `on(Event, args...)`, for the events
// it cares about; the pipeline calls only the overloads that exist, so the default observer
// (none) compiles to nothing. Events are tag types in `commit_order::events`, so a misspelt
// hook is a compile error in the observer itself, never a hook that is silently not called;
// an overload whose parameters do not match what the pipeline passes is refused by a shape
// rule. `counting_observer` counts every event, which is what tests and dashboards usually want.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

#include "commit_order/offset.hpp"

namespace commit_order {

namespace events {
/// `on(polled, std::size_t records, position read)`: a poll returned `records` records.
struct polled final {
  static constexpr std::string_view name = "polled";
};
/// `on(row_written, offset)`: the sink applied the record's row.
struct row_written final {
  static constexpr std::string_view name = "row_written";
};
/// `on(replay_absorbed, offset)`: the offset guard kept a newer row (a replay, absorbed).
struct replay_absorbed final {
  static constexpr std::string_view name = "replay_absorbed";
};
/// `on(unit_committed, position)`: a unit's position became durable.
struct unit_committed final {
  static constexpr std::string_view name = "unit_committed";
};
/// `on(auto_committed, position)`: AutoCommit's timer committed the read position.
struct auto_committed final {
  static constexpr std::string_view name = "auto_committed";
};
/// `on(retried, offset, std::size_t attempt)`: a failed record is tried again.
struct retried final {
  static constexpr std::string_view name = "retried";
};
/// `on(world_retried, std::size_t attempt, std::chrono::milliseconds wait)`: a unit (or, outside
/// a transaction, a write) the world failed is tried again after `wait` (`retry_world`).
struct world_retried final {
  static constexpr std::string_view name = "world_retried";
};
/// `on(dead_lettered, offset)`: a record was given to the dead-letter sink.
struct dead_lettered final {
  static constexpr std::string_view name = "dead_lettered";
};
/// `on(record_failed, offset)`: a record failed for good and stopped the pipeline.
struct record_failed final {
  static constexpr std::string_view name = "record_failed";
};
}  // namespace events

namespace detail {
/// Converts to anything: probes whether an observer has an overload for an event at all, so an
/// overload with the wrong parameters is refused instead of silently never called.
struct any_argument final {
  template <class T>
  operator T() const;  // NOLINT: implicit by design; never defined, only named in requires
};

template <class O, class Event, class... Args>
concept observes = requires(O& o, const Args&... args) {
  o.on(Event{}, args...);
};

template <class O, class Event>
concept has_any_overload_for = observes<O, Event> || observes<O, Event, any_argument> ||
    observes<O, Event, any_argument, any_argument> ||
    observes<O, Event, any_argument, any_argument, any_argument>;

/// An overload for `Event` exists but does not take `Args`: it would never be called.
template <class O, class Event, class... Args>
inline constexpr bool near_miss = has_any_overload_for<O, Event> && !observes<O, Event, Args...>;
}  // namespace detail

/// True when O has an `on` overload for some event that does not take what the pipeline passes.
template <class O>
inline constexpr bool observer_misses_a_hook =
    detail::near_miss<O, events::polled, std::size_t, position> ||
    detail::near_miss<O, events::row_written, offset> ||
    detail::near_miss<O, events::replay_absorbed, offset> ||
    detail::near_miss<O, events::unit_committed, position> ||
    detail::near_miss<O, events::auto_committed, position> ||
    detail::near_miss<O, events::retried, offset, std::size_t> ||
    detail::near_miss<O, events::world_retried, std::size_t, std::chrono::milliseconds> ||
    detail::near_miss<O, events::dead_lettered, offset> ||
    detail::near_miss<O, events::record_failed, offset>;

/// The default: no hooks, no state, no cost.
struct no_observer final {};

/// Counts what happened. Attach it with `with_observer<counting_observer>`.
struct counting_observer final {
  std::size_t polls = 0;             ///< non-empty polls
  std::size_t records_polled = 0;    ///< records handed out by the source
  std::size_t rows_written = 0;      ///< rows the sink applied
  std::size_t replays_absorbed = 0;  ///< rows the offset guard kept (a replay, absorbed)
  std::size_t units_committed = 0;   ///< units whose position became durable
  std::size_t auto_commits = 0;      ///< timer commits (AutoCommit)
  std::size_t retries = 0;           ///< re-attempts after a failed record
  std::size_t world_retries = 0;     ///< tries again after the world's failure (retry_world)
  std::size_t dead_lettered = 0;     ///< records given to the dead-letter sink
  std::size_t records_failed = 0;    ///< failures that stopped the pipeline

  void on(events::polled, std::size_t records, position) noexcept {
    ++polls;
    records_polled += records;
  }
  void on(events::row_written, offset) noexcept { ++rows_written; }
  void on(events::replay_absorbed, offset) noexcept { ++replays_absorbed; }
  void on(events::unit_committed, position) noexcept { ++units_committed; }
  void on(events::auto_committed, position) noexcept { ++auto_commits; }
  void on(events::retried, offset, std::size_t) noexcept { ++retries; }
  void on(events::world_retried, std::size_t, std::chrono::milliseconds) noexcept {
    ++world_retries;
  }
  void on(events::dead_lettered, offset) noexcept { ++dead_lettered; }
  void on(events::record_failed, offset) noexcept { ++records_failed; }
};

}  // namespace commit_order
