// SPDX-License-Identifier: BSL-1.0
// commit_order/capabilities.hpp — what a sink or position store declares about itself.
//
// Capabilities are tag types collected in `capabilities<...>`. A type declares them with a
// nested alias (`using capabilities = commit_order::capabilities<Idempotent, Synced>;`) or,
// for a type the user does not own, with a specialisation of `capability_traits<T>`.
// The legality rules (rules.hpp) read nothing else: a sink is exactly as safe as it claims.
#pragma once

#include <cstddef>
#include <string_view>
#include <type_traits>

#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include "commit_order/part_checks.hpp"

namespace commit_order {

// ---- behaviour tags ------------------------------------------------------------------------

/// Keyed upsert on an event-derived key under a uniqueness constraint: a replay rewrites the
/// same row instead of adding one.
struct Idempotent final {
  static constexpr std::string_view name = "Idempotent";
};
/// The upsert only wins when the incoming source offset is newer than the row's, and every row
/// carries its source offset: a replayed older record never overwrites newer data.
struct OffsetGuarded final {
  static constexpr std::string_view name = "OffsetGuarded";
};
/// Every write appends a new entry (a log, a topic) and none replaces another: there is no row a
/// replay could put older data over, so the offset guard R5 asks of an upsert has nothing to
/// guard. A replay would add a copy instead, so the other rules hold as for any sink that keeps
/// what it is given (R3 refuses it under a replaying policy).
struct AppendOnly final {
  static constexpr std::string_view name = "AppendOnly";
};
/// The sink is a stream that another consumer reads (a topic): a replay appends a copy that its
/// readers see, at a new offset. Declared, the copies are the next hop's to absorb, by a key or
/// a version carried from the event (an offset guard cannot: each copy has an offset of its
/// own), and R3 accepts the sink under a replaying policy, whose guarantee stays MayDuplicate.
struct Emits final {
  static constexpr std::string_view name = "Emits";
};
/// The sink's rows are durable only once its flush() returns (a producer waiting for its
/// acknowledgements): the pipeline calls flush() at the end of each unit's write step. Declared,
/// a sink or a wrapper restating the capabilities without a flush() the loop can call is
/// refused (S30), as is an executor (R20).
struct Flushed final {
  static constexpr std::string_view name = "Flushed";
};
/// Declared by a dead-letter sink whose letters are written in the pipeline's sink's own
/// transaction (`using sink_type = ...;` names that sink), durable with the commit that passes
/// their records' position rather than when put() returns: a letter and the position that
/// passes its record commit together, or neither does. Only that sink, storing the position in
/// its transaction (TransactionalPosition), may be the pipeline's sink (R21).
struct CommitsWithSink final {
  static constexpr std::string_view name = "CommitsWithSink";
};
/// Multi-row transactions that can also store and load the consumer's position.
struct Transactional final {
  static constexpr std::string_view name = "Transactional";
};
/// Applying a record twice leaves the same state as applying it once (a delete, a tombstone,
/// a set insertion), without any key machinery in the sink.
struct DuplicatesHarmless final {
  static constexpr std::string_view name = "DuplicatesHarmless";
};
/// The write has an effect outside any store (an e-mail, a payment API call): it can never be
/// made idempotent by ordering.
struct SideEffecting final {
  static constexpr std::string_view name = "SideEffecting";
};
/// Rows carry the partition they came from beside their source offset, and the offset guard
/// compares offsets only within a partition: one table can be fed by many partitions. A key
/// arriving from another partition than its row's is `key_moved_partition`, never an absorb.
struct PartitionScoped final {
  static constexpr std::string_view name = "PartitionScoped";
};
/// The upsert only wins when the event's per-key version (`Member`, set by the producer, e.g.
/// an order's event_seq) is newer than the row's: a guard that, unlike source offsets, survives
/// repartitioning. Counts as an offset guard for the rules that need one (R5, R15, R17).
template <auto Member>
struct VersionGuarded final {
  static constexpr auto member = Member;
  static constexpr std::string_view name = "VersionGuarded";
};
/// `apply` may be called from several threads at once (required to hand writes to an executor).
struct Concurrent final {
  static constexpr std::string_view name = "Concurrent";
};
/// Something a ledger reads: loss is never acceptable.
struct Ledger final {
  static constexpr std::string_view name = "Ledger";
};

// ---- durability ----------------------------------------------------------------------------

/// Durability levels, ordered by `rank`: what survives which failure.
struct Volatile final {  ///< lost when the process dies
  static constexpr int rank = 0;
  static constexpr std::string_view name = "Volatile";
};
struct Buffered final {  ///< survives a process crash (handed to the OS), not a power loss
  static constexpr int rank = 1;
  static constexpr std::string_view name = "Buffered";
};
struct Synced final {  ///< fsync'ed: survives a power loss of the machine
  static constexpr int rank = 2;
  static constexpr std::string_view name = "Synced";
};
struct Replicated final {  ///< acknowledged by several machines: survives losing one
  static constexpr int rank = 3;
  static constexpr std::string_view name = "Replicated";
};

template <class T>
concept durability_level = std::is_same_v<T, Volatile> || std::is_same_v<T, Buffered> ||
    std::is_same_v<T, Synced> || std::is_same_v<T, Replicated>;

// ---- transaction size ----------------------------------------------------------------------

/// The largest number of rows the sink accepts in one transaction. A batch above it is split,
/// and the position advances per split.
/// (Its check is its constraint, so it runs where the tag is named.)
template <std::size_t N>
requires(part_rules::require<part_rules::max_transaction_rows_zero,
                             (N > 0)>()) struct MaxTransactionRows final {
  static constexpr std::size_t value = N;
};

// ---- the declaration -----------------------------------------------------------------------

/// A set of capability tags. Order does not matter; duplicates are harmless.
template <class... Tags>
struct capabilities final {
  static constexpr auto tags = boost::hana::tuple_t<Tags...>;
};

/// Customisation point for types the user does not own: specialise it with a nested
/// `using capabilities = commit_order::capabilities<...>;`.
template <class T>
struct capability_traits {};

template <class T>
requires requires {
  typename T::capabilities;
}
struct capability_traits<T> {
  using capabilities = typename T::capabilities;
};

namespace detail {
template <class T>
struct is_capabilities : std::false_type {};
template <class... Tags>
struct is_capabilities<capabilities<Tags...>> : std::true_type {};

template <class T>
struct is_max_transaction_rows : std::false_type {};
template <std::size_t N>
struct is_max_transaction_rows<MaxTransactionRows<N>> : std::true_type {};

// The queries below are plain pack expansions over `capabilities<Tags...>`: each is asked for
// every part of every configuration the rules judge, and a fold costs the compiler far less
// than a generic algorithm over a type-level tuple.
template <class Caps, class Tag>
struct contains_tag : std::false_type {};
template <class... Tags, class Tag>
struct contains_tag<capabilities<Tags...>, Tag>
    : std::bool_constant<(std::is_same_v<Tags, Tag> || ...)> {};

// The first of Tags that is a durability level, or Fallback.
template <class Fallback, class... Tags>
struct first_durability {
  using type = Fallback;
};
template <class Fallback, class First, class... Rest>
struct first_durability<Fallback, First, Rest...> {
  using type = typename std::conditional_t<durability_level<First>, std::type_identity<First>,
                                           first_durability<Fallback, Rest...>>::type;
};
template <class Caps, class Fallback>
struct durability_in {
  using type = Fallback;
};
template <class... Tags, class Fallback>
struct durability_in<capabilities<Tags...>, Fallback> {
  using type = typename first_durability<Fallback, Tags...>::type;
};
template <class Caps>
struct names_durability : std::false_type {};
template <class... Tags>
struct names_durability<capabilities<Tags...>>
    : std::bool_constant<(durability_level<Tags> || ...)> {};

// The N of the first MaxTransactionRows<N> among Tags, or 0.
template <class... Tags>
struct first_max_rows : std::integral_constant<std::size_t, 0> {};
template <std::size_t N, class... Rest>
struct first_max_rows<MaxTransactionRows<N>, Rest...> : std::integral_constant<std::size_t, N> {};
template <class First, class... Rest>
struct first_max_rows<First, Rest...> : first_max_rows<Rest...> {};
template <class Caps>
struct max_rows_in : std::integral_constant<std::size_t, 0> {};
template <class... Tags>
struct max_rows_in<capabilities<Tags...>> : first_max_rows<Tags...> {};
}  // namespace detail

namespace detail {
// A concept of its own so that the conjunction below stays readable under clang-format 14.
template <class T>
concept names_capabilities = requires {
  typename capability_traits<T>::capabilities;
};
}  // namespace detail

/// True when T declares its capabilities (nested alias or trait).
template <class T>
concept declares_capabilities = detail::names_capabilities<T> &&
    detail::is_capabilities<typename capability_traits<T>::capabilities>::value;

template <class T>
using capabilities_of_t = typename capability_traits<T>::capabilities;

/// Does the capability set `Caps` contain `Tag`?
template <class Caps, class Tag>
inline constexpr bool contains_capability_v = detail::contains_tag<Caps, Tag>::value;

namespace detail {
template <class T>
struct is_version_guard : std::false_type {};
template <auto M>
struct is_version_guard<VersionGuarded<M>> : std::true_type {};
template <class Caps>
struct has_version_guard : std::false_type {};
template <class... Tags>
struct has_version_guard<capabilities<Tags...>>
    : std::bool_constant<(is_version_guard<Tags>::value || ...)> {};
}  // namespace detail

/// Does T declare the tag `Tag`? False for a type that declares nothing.
template <class T, class Tag>
inline constexpr bool has_capability_v = [] {
  if constexpr (declares_capabilities<T>) {
    return contains_capability_v<capabilities_of_t<T>, Tag>;
  } else {
    return false;
  }
}();

/// Does T declare a `VersionGuarded<...>` guard?
template <class T>
inline constexpr bool version_guarded_v = [] {
  if constexpr (declares_capabilities<T>) {
    return detail::has_version_guard<capabilities_of_t<T>>::value;
  } else {
    return false;
  }
}();

/// Does T guard its upsert against an older record: by source offset, or by a version?
template <class T>
inline constexpr bool guarded_v = has_capability_v<T, OffsetGuarded> || version_guarded_v<T>;

namespace detail {
template <class T, class Fallback>
struct durability_of {
  using type = Fallback;
};
template <class T, class Fallback>
requires declares_capabilities<T>
struct durability_of<T, Fallback> {
  using type = typename durability_in<capabilities_of_t<T>, Fallback>::type;
};
}  // namespace detail

/// True when T declares a durability level among its capabilities. Every sink, position store
/// and source must: the durability rules (R9a-c) compare them, and an assumed level would be
/// the wrong guess in one direction or the other.
template <class T>
concept declares_durability =
    declares_capabilities<T> && detail::names_durability<capabilities_of_t<T>>::value;

/// The durability T declares (T must declare one).
template <class T>
requires declares_durability<T>
using durability_t = typename detail::durability_of<T, Volatile>::type;

namespace detail {
template <class Caps, class Level>
struct with_default_durability;
template <class... Tags, class Level>
struct with_default_durability<capabilities<Tags...>, Level> {
  using type = std::conditional_t<(durability_level<Tags> || ...), capabilities<Tags...>,
                                  capabilities<Tags..., Level>>;
};
}  // namespace detail

/// `Caps`, plus the durability `Level` when `Caps` names no durability of its own.
template <class Caps, durability_level Level>
using with_default_durability_t = typename detail::with_default_durability<Caps, Level>::type;

/// The durability T declares, or `Default` when it declares none.
template <class T, durability_level Default>
using declared_durability_t = typename detail::durability_of<T, Default>::type;

// ---- what an adapter's code implements -----------------------------------------------------

namespace detail {
// The tags a type derived from an adapter's part may add to what the adapter implements: each
// only makes the rules stricter.
template <class Tag>
inline constexpr bool stricter_tag =
    std::is_same_v<Tag, Ledger> || std::is_same_v<Tag, SideEffecting> ||
    is_max_transaction_rows<Tag>::value;

template <class Restated, class Implemented>
struct restates_within : std::false_type {};
template <class... R, class... I>
struct restates_within<capabilities<R...>, capabilities<I...>>
    : std::bool_constant<(contains_tag<capabilities<R...>, I>::value && ...) &&
                         ((contains_tag<capabilities<I...>, R>::value || stricter_tag<R>)&&...)> {};

template <class T>
concept names_implemented_capabilities = requires {
  typename T::implemented_capabilities;
};
}  // namespace detail

/// An adapter whose own code gives what its part declares (the guard its SQL runs, the
/// durability its connection was checked for) names it twice: `using capabilities = X;` and
/// `using implemented_capabilities = X;`. A type derived from the part inherits both; where it
/// restates its capabilities (to add Ledger, say), it keeps every tag the adapter implements,
/// its durability included, and adds only Ledger, SideEffecting or MaxTransactionRows<N>
/// (rule S28). True for every type that names no implemented capabilities.
template <class T>
inline constexpr bool restates_truthfully_v = [] {
  if constexpr (detail::names_implemented_capabilities<T> && declares_capabilities<T>) {
    return detail::restates_within<capabilities_of_t<T>,
                                   typename T::implemented_capabilities>::value;
  } else {
    return true;
  }
}();

/// The static maximum transaction size, or 0 when the sink declares none.
template <class Sink>
inline constexpr std::size_t max_transaction_rows_v = [] {
  if constexpr (declares_capabilities<Sink>) {
    return detail::max_rows_in<capabilities_of_t<Sink>>::value;
  } else {
    return std::size_t{0};
  }
}();

}  // namespace commit_order
