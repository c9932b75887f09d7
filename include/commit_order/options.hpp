// SPDX-License-Identifier: BSL-1.0
// commit_order/options.hpp — compile-time options of a pipeline, and its run-time settings.
//
// Options are named wrappers passed after the policy, in any order:
//   pipeline<Source, Sink, AtLeastOnce<>, with_store<Store>, with_error_handling<retry<3>>>
// Each has a default that costs nothing, so the plain form compiles to the hand-written loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <type_traits>

#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order {

// ---- the options ---------------------------------------------------------------------------

/// Where a non-transactional policy commits its position.
template <class Store>
struct with_store final {
  using type = Store;
};

/// The clock that drives AutoCommit's timer; inject a manual clock to run in virtual time.
template <class Clock>
struct with_clock final {
  using type = Clock;
};

/// A stateless mapping from the source's event to the sink's row (default: the event itself).
template <class Transform>
struct with_transform final {
  using type = Transform;
};

/// Receives progress and failure notifications; see `observer.hpp`.
template <class Observer>
struct with_observer final {
  using type = Observer;
};

/// Stops the pipeline at chosen step boundaries and rows; see `faults.hpp`.
template <class Faults>
struct with_faults final {
  using type = Faults;
};

/// What happens when a record fails in the transform or the sink: `stop` (default),
/// `retry<N>` or `dead_letter<N>`.
template <class Handling>
struct with_error_handling final {
  using type = Handling;
};

/// Where `dead_letter<N>` writes the records it gives up on.
template <class DeadLetters>
struct with_dead_letters final {
  using type = DeadLetters;
};

/// Hands each record's write to an executor (`e.execute(std::function<void()>)`), so writes
/// complete out of order; the position then advances through a completion tracker. The
/// executor must, sooner or later, run or destroy every task it accepts: a task destroyed
/// unrun is reported as a failed write, and the pipeline waits for the rest before it goes.
template <class Executor>
struct with_executor final {
  using type = Executor;
};

// ---- defaults ------------------------------------------------------------------------------

/// The transform that passes the event through unchanged (and uncopied).
struct identity_transform final {
  template <class Event>
  constexpr const Event& operator()(const Event& e) const noexcept {
    return e;
  }
};

/// Marker for "no dead-letter sink".
struct no_dead_letters final {};

/// Marker for "write on the pipeline's own thread".
struct no_executor final {};

/// Marker for "no clock given": AutoCommit's timer then runs on std::chrono::steady_clock.
struct default_clock final {};

// ---- error handling ------------------------------------------------------------------------

/// Stop at the first failed record with `record_failed`, naming its offset. The position never
/// passes it: a transaction rolls back; a non-transactional write commits only its durable
/// contiguous prefix. Default.
struct stop final {
  static constexpr std::size_t retries = 0;
  static constexpr bool dead_letters = false;
};

/// Retry a failed record up to N more times (a transactional unit is rolled back and re-run
/// whole), then stop. (Its check is its constraint, so it runs where the type is named.)
template <std::size_t N>
requires(part_rules::require<part_rules::retry_count_zero, (N > 0)>()) struct retry final {
  static constexpr std::size_t retries = N;
  static constexpr bool dead_letters = false;
};

/// Retry up to N times, then write the record to the dead-letter sink and go on. The position
/// passes the record only after the dead-letter write returned (is durable).
template <std::size_t N = 0>
struct dead_letter final {
  static constexpr std::size_t retries = N;
  static constexpr bool dead_letters = true;
};

template <class H>
concept error_handling = requires {
  { H::retries } -> std::convertible_to<std::size_t>;
  { H::dead_letters } -> std::convertible_to<bool>;
};

/// Try a unit the world failed up to N more times, waiting between tries (settings::
/// world_backoff), and handle a record's own failure with `OnRecord`. The world's failure is an
/// `infrastructure_error` a step raised (a 503 from an API a sink writes to, a busy or
/// unreachable database, a serialization failure that outlasted the sink's own retries), not
/// a record's: the position is held while it is tried again, the record is never blamed or
/// dead-lettered for it, and once the N tries are spent the last error stops the pipeline as
/// it would have without them. A transactional unit is rolled back and re-run whole; outside a
/// transaction the failed write is tried again in place (rule R16: the sink must be Idempotent
/// or DuplicatesHarmless, as a write that failed may have landed). Not tried again: a failed
/// rollback (`rollback_failed`: the sink's state is unknown), a key that moved partition, and
/// everything that is not an infrastructure_error (`fenced`, `position_lost`, ...).
template <std::size_t N, error_handling OnRecord = stop>
requires(part_rules::require<part_rules::retry_count_zero, (N > 0)>()) struct retry_world final {
  static constexpr std::size_t retries = OnRecord::retries;
  static constexpr bool dead_letters = OnRecord::dead_letters;
  static constexpr std::size_t world_retries = N;
  using on_record = OnRecord;
};

namespace detail {
/// How many more times a unit the world failed is tried: 0 unless the handling is retry_world.
template <class H>
inline constexpr std::size_t world_retries_v = 0;
template <class H>
requires requires {
  H::world_retries;
}
inline constexpr std::size_t world_retries_v<H> = H::world_retries;
}  // namespace detail

/// The waits of `retry_world`: `first` before the first try again, doubled after each, never
/// more than `longest`.
struct backoff final {
  std::chrono::milliseconds first{100};
  std::chrono::milliseconds longest{10000};
  /// The wait before try `attempt` (1 for the first try again).
  [[nodiscard]] constexpr std::chrono::milliseconds before(std::size_t attempt) const noexcept {
    std::chrono::milliseconds wait = first;
    for (std::size_t i = 1; i < attempt && wait < longest; ++i)
      wait *= 2;
    return wait < longest ? wait : longest;
  }
};

// ---- run-time settings ---------------------------------------------------------------------

/// Run-time settings of a pipeline.
struct settings final {
  /// Largest number of records one Poll returns: the unit of atomicity under EveryBatch.
  std::size_t batch_size = 500;
  /// A run-time cap on rows per unit, on top of the sink's own limits (0: none).
  std::size_t max_transaction_rows = 0;
  /// AutoCommit's interval (Kafka's auto.commit.interval.ms default is 5 s).
  std::chrono::milliseconds auto_commit_interval{5000};
  /// The owner epoch this consumer claims on a fencing sink: claim raises the stored epoch to it
  /// or is fenced. Unset (the default), the pipeline claims a fresh epoch, one above the stored
  /// one: the consumer started last owns the position and an older one still running is fenced
  /// at its next position write. A group-managed source's epochs come from its generation.
  /// Set, it must be above 0: epoch 0 is no owner's (std::invalid_argument at construction).
  std::optional<epoch> owner_epoch{};
  /// Where a consumer with no stored position starts; unset: the earliest retained record.
  /// Set it (e.g. to position{0}) when the whole stream must be consumed: a consumer that died
  /// before its first commit while retention ran then gets `position_lost`, not a later start.
  std::optional<position> initial_position{};
  /// With an executor: the most records in flight at once (back-pressure on the poll).
  std::size_t max_in_flight = 4096;
  /// `retry_world`'s waits between tries (unused by every other error handling).
  backoff world_backoff{};
};

namespace detail {
template <template <class> class Option, class T>
struct is_option : std::false_type {};
template <template <class> class Option, class T>
struct is_option<Option, Option<T>> : std::true_type {};

// The argument of the first Option<...> among Options, or Default.
template <template <class> class Option, class Default, class... Options>
struct find_option {
  using type = Default;
};
template <template <class> class Option, class Default, class First, class... Rest>
struct find_option<Option, Default, First, Rest...> {
  using type = typename std::conditional_t<is_option<Option, First>::value, First,
                                           find_option<Option, Default, Rest...>>::type;
};

template <class T>
inline constexpr bool is_known_option =
    is_option<with_store, T>::value || is_option<with_clock, T>::value ||
    is_option<with_transform, T>::value || is_option<with_observer, T>::value ||
    is_option<with_faults, T>::value || is_option<with_error_handling, T>::value ||
    is_option<with_dead_letters, T>::value || is_option<with_executor, T>::value;

/// Was an Option<...> given among Options?
template <template <class> class Option, class... Options>
inline constexpr bool has_option = (is_option<Option, Options>::value || ...);

template <template <class> class Option, class... Options>
inline constexpr std::size_t option_count = (std::size_t{is_option<Option, Options>::value} + ... +
                                             0);

// Every option given is known, and none is given twice (the second would be ignored).
template <class... Options>
inline constexpr bool options_well_formed =
    (is_known_option<Options> && ...) && option_count<with_store, Options...> <= 1 &&
    option_count<with_clock, Options...> <= 1 && option_count<with_transform, Options...> <= 1 &&
    option_count<with_observer, Options...> <= 1 && option_count<with_faults, Options...> <= 1 &&
    option_count<with_error_handling, Options...> <= 1 &&
    option_count<with_dead_letters, Options...> <= 1 &&
    option_count<with_executor, Options...> <= 1;
}  // namespace detail

}  // namespace commit_order
