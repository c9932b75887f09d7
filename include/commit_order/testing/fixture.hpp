// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/fixture.hpp — what the conformance kit needs from the adapter under test:
// a fixture, written by the adapter's author, that builds the parts over storage of its own.
//
// A fixture is a default-constructible type whose constructor creates fresh, empty storage (a
// scratch directory, a new database, new memory objects) — the kit makes one per scenario — and
// that provides:
//
//   using event_type  = ...;   the source's event type
//   using source_type = ...;   a commit_order::source whose records carry event_type
//   using sink_type   = ...;   the sink under test
//   static event_type make_event(std::int64_t key, std::int64_t seq);
//                              the kit's events: `key` is the sink's idempotency key (small,
//                              >= 0), `seq` counts that key's events (0, 1, 2, ...); two events
//                              with different (key, seq) must compare unequal once written
//   void create_log(std::span<const event_type> events);
//                              the source's storage holds these events at offsets 0..n-1
//   source_type& source();     the source, opened over the storage (or the one already open)
//   sink_type& sink();         the sink, likewise
//   void close();              closes every open part, as the process's death would; the
//                              storage stays. The next source()/sink()/store() reopen it.
//   std::vector<observed_row<R>> rows();
//                              the sink's rows as they are now, read back from its storage (R
//                              is the sink's row_type): the key, the source offset, the row
//
// and, where the adapter has them:
//
//   using store_type = ...;  store_type& store();
//                              a position store over the storage (AtMostOnce, AtLeastOnce)
//   using transform_type = ...;
//                              a stateless mapping from event_type to the sink's row_type
//   void truncate_before(position p);
//                              the source's retention: deletes records before p (or fewer, as
//                              whole segments do); the kit reads earliest() afterwards
//   offset append(const event_type& e);
//                              appends to the source's storage, as durable on return as the
//                              source declares (the source's Synced check needs it)
//   P& power();                the power-cut facility over this fixture's storage (see
//                              power_cut_facility): every part that declares Synced is checked
//                              across simulated power cuts with it, and a Synced part without
//                              it is a reported failure
//   std::vector<observed_row<R>> uncommitted_rows();
//                              a sink that is a log written in transactions (a topic): what a
//                              read_uncommitted reader is shown, aborted attempts included, in
//                              log order; rows() is then what a read_committed reader is shown,
//                              in log order. The crash matrix then also runs its
//                              transactional-log section (detail/log_views.hpp)
//   static constexpr bool source_is_stand_in = true;
//                              the source only feeds the sink under test (e.g. a memory log
//                              declared Synced in front of a database sink): its declared
//                              capabilities are not checked, and the report says so
//
// A fixture over a topic of several partitions has, instead of the single-partition source and
// create_log:
//
//   static constexpr std::size_t partitions = N;
//                              the topic's partitions (at least one)
//   using source_type = ...;   a commit_order::partitioned_source assigned every partition
//   void create_log(partition_id k, std::span<const event_type> events);
//                              partition k holds these events at offsets 0..n-1; the kit's
//                              keys never move between partitions
//   sink_type                  takes apply(partition, offset, row) (a partitioned_sink) and,
//                              transactional, keeps one position per partition
//   store_type (optional)      one position per partition: load(k), commit(k, p)
//   rows()                     each row with its source_partition
//
// The crash matrix runs over such a fixture; the capability checks, the power cuts and the
// random schedules are single-partition, and a report over it lists them as not run.
//
// Memory parts are their own storage: their fixture's close() does nothing and every reopen
// returns the same objects, which is exactly what a crash leaves them (docs/testing-kit.md).
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ratio>
#include <span>
#include <type_traits>
#include <vector>

#include "commit_order/concepts.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"

namespace commit_order::testing {

/// One row of the sink as the fixture reads it back.
template <class Row>
struct observed_row {
  std::int64_t key = 0;             ///< the key the row is stored under (the event's key)
  offset source_offset{};           ///< the source offset the row carries
  Row row{};                        ///< the row itself, compared with the row the record makes
  partition_id source_partition{};  ///< the partition it carries (a partitioned fixture's)
  /// Where a log's reader was shown it (a transactional log's fixture): its views are then
  /// matched by log offset, exactly, rather than by content.
  std::optional<std::int64_t> log_offset{};
};

/// Simulated power cuts over one fixture's storage (an LD_PRELOAD shim, a VFS, a server stopped
/// without a checkpoint...). Sync points are where the storage is made durable (fsync and
/// fdatasync, a WAL flush); the power goes out at one of them.
template <class P>
concept power_cut_facility = requires(P& p, std::uint64_t n) {
  p.watch();  ///< what the storage holds now is durable; counters cleared, disarmed
  p.arm(n);   ///< the power goes out at the n-th sync point from now (0: never)
  { p.syncs() } -> std::convertible_to<std::uint64_t>;  ///< sync points since watch()
  { p.is_out() } -> std::convertible_to<bool>;          ///< the power went out
  /// The power goes out now if it has not; the storage becomes what survived (every part must
  /// be closed first), and is watched again as the new baseline.
  p.restore();
};

/// A virtual clock for AutoCommit's timer: the kit moves it at fault points, so the timer fires
/// at boundaries that are the same in every run.
struct manual_clock final {
  using rep = std::int64_t;
  using period = std::milli;
  using duration = std::chrono::milliseconds;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = true;
  static inline time_point current{};
  static time_point now() noexcept { return current; }
  static void advance(duration d) noexcept { current += d; }
};

namespace detail {
template <class F>
concept names_store = requires {
  typename F::store_type;
};
template <class F>
concept names_transform = requires {
  typename F::transform_type;
};
template <class F, bool = names_store<F>>
struct store_of {
  using type = no_position_store;
};
template <class F>
struct store_of<F, true> {
  using type = typename F::store_type;
};
template <class F, bool = names_transform<F>>
struct transform_of {
  using type = identity_transform;
};
template <class F>
struct transform_of<F, true> {
  using type = typename F::transform_type;
};
}  // namespace detail

/// The members every fixture must have (the optional members are detected separately).
template <class F>
concept fixture_members = requires {
  typename F::event_type;
  typename F::source_type;
  typename F::sink_type;
}
&&source<typename F::source_type>&& sink<typename F::sink_type>&& requires(
    F& f, std::span<const typename F::event_type> events, std::int64_t k) {
  { F::make_event(k, k) } -> std::convertible_to<typename F::event_type>;
  f.create_log(events);
  { f.source() } -> std::same_as<typename F::source_type&>;
  { f.sink() } -> std::same_as<typename F::sink_type&>;
  f.close();
  { f.rows() } -> std::same_as<std::vector<observed_row<sink_row_t<typename F::sink_type>>>>;
};

/// The members of a fixture over a topic of several partitions.
template <class F>
concept partitioned_fixture_members = requires {
  typename F::event_type;
  typename F::source_type;
  typename F::sink_type;
  { F::partitions } -> std::convertible_to<std::size_t>;
}
&&partitioned_source<typename F::source_type>&& partitioned_sink<typename F::sink_type>&& requires(
    F& f, partition_id p, std::span<const typename F::event_type> events, std::int64_t k) {
  { F::make_event(k, k) } -> std::convertible_to<typename F::event_type>;
  f.create_log(p, events);
  { f.source() } -> std::same_as<typename F::source_type&>;
  { f.sink() } -> std::same_as<typename F::sink_type&>;
  f.close();
  { f.rows() } -> std::same_as<std::vector<observed_row<sink_row_t<typename F::sink_type>>>>;
};

/// The shape every fixture must have: its members, single-partition or partitioned, and a fresh
/// fixture (fresh storage) from its default constructor.
template <class F>
concept conformance_fixture = std::default_initializable<F> &&
    (fixture_members<F> || partitioned_fixture_members<F>);

/// A fixture over a single-partition source: what every check of the kit runs over.
template <class F>
concept single_partition_fixture = std::default_initializable<F> && fixture_members<F>;

/// What the kit reads off a fixture.
template <class F>
requires fixture_members<F> || partitioned_fixture_members<F>
struct fixture_traits final {
  using event_type = typename F::event_type;
  using source_type = typename F::source_type;
  using sink_type = typename F::sink_type;
  using row_type = sink_row_t<sink_type>;
  using store_type = typename detail::store_of<F>::type;
  using transform_type = typename detail::transform_of<F>::type;

  /// Over a topic of several partitions (partitioned_fixture_members).
  static constexpr bool partitioned = partitioned_fixture_members<F>;
  static constexpr std::size_t partitions = [] {
    if constexpr (partitioned) {
      return static_cast<std::size_t>(F::partitions);
    } else {
      return std::size_t{1};
    }
  }();

  static constexpr bool has_store = detail::names_store<F> && requires(F & f) {
    { f.store() } -> std::same_as<store_type&>;
  };
  static constexpr bool has_retention = requires(F & f, position p) { f.truncate_before(p); };
  static constexpr bool has_append = requires(F & f, const event_type& e) {
    { f.append(e) } -> std::same_as<offset>;
  };
  static constexpr bool has_uncommitted_view = requires(F & f) {
    { f.uncommitted_rows() } -> std::same_as<std::vector<observed_row<row_type>>>;
  };
  static constexpr bool has_power = requires(F & f) {
    f.power();
    requires power_cut_facility<std::remove_cvref_t<decltype(f.power())>>;
  };
  static constexpr bool source_is_stand_in = [] {
    if constexpr (requires { F::source_is_stand_in; }) {
      return static_cast<bool>(F::source_is_stand_in);
    } else {
      return false;
    }
  }();

  /// The row the sink must hold for `e`.
  static row_type row_of(const event_type& e) { return row_type(transform_type{}(e)); }
};

}  // namespace commit_order::testing
