// commit_order/options.hpp — compile-time options of a pipeline, and its run-time settings.
//
// Options are named wrappers passed after the policy:
//   pipeline<Source, Sink, AtLeastOnce<>, with_store<Store>, with_clock<Clock>>
// Each has a default that costs nothing, so the plain form is the hand-written loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <type_traits>

namespace commit_order {

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

/// Run-time settings of a pipeline.
struct settings final {
  /// Largest number of records one Poll returns: the unit of atomicity under EveryBatch.
  std::size_t batch_size = 500;
  /// AutoCommit's interval (Kafka's auto.commit.interval.ms default is 5 s).
  std::chrono::milliseconds auto_commit_interval{5000};
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
    is_option<with_store, T>::value || is_option<with_clock, T>::value;
}  // namespace detail

}  // namespace commit_order
