// commit_order/record.hpp — what the library reads from a record: its source offset and the
// event it carries.
//
// A record is anything with a readable source offset. By default that is a member
// `commit_order::offset source_offset`; the event is the member `event` when there is one and
// the record itself otherwise; the partition is the member `partition_id source_partition`
// when there is one (a record of a partitioned stream) and partition 0 otherwise. Types the
// user does not own specialise `record_traits`.
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

#include "commit_order/offset.hpp"

namespace commit_order {

/// A record as an in-memory or file-backed log stores it: the event and where it sits.
template <class Event>
struct logged final {
  offset source_offset;
  Event event;
};

/// A record of a partitioned stream as the testing kit's partitioned log stores it.
template <class Event>
struct partitioned_logged final {
  partition_id source_partition;
  offset source_offset;
  Event event;
};

/// Customisation point: specialise with static `offset_of(const R&)` and, optionally,
/// `event_of(const R&)` and `partition_of(const R&)` for record types you do not own.
template <class R>
struct record_traits {};

namespace detail {
template <class R>
concept has_source_offset_member = requires(const R& r) {
  { r.source_offset } -> std::convertible_to<const offset&>;
};
template <class R>
concept has_event_member = requires(const R& r) {
  r.event;
};
template <class R>
concept has_traits_offset = requires(const R& r) {
  { record_traits<R>::offset_of(r) } -> std::same_as<offset>;
};
template <class R>
concept has_traits_event = requires(const R& r) {
  record_traits<R>::event_of(r);
};

template <class R>
concept has_source_partition_member = requires(const R& r) {
  { r.source_partition } -> std::convertible_to<const partition_id&>;
};
template <class R>
concept has_traits_partition = requires(const R& r) {
  { record_traits<R>::partition_of(r) } -> std::same_as<partition_id>;
};

struct partition_of_fn final {
  template <class R>
  constexpr partition_id operator()(const R& r) const noexcept {
    if constexpr (has_traits_partition<R>) {
      return record_traits<R>::partition_of(r);
    } else if constexpr (has_source_partition_member<R>) {
      return r.source_partition;
    } else {
      return partition_id{0};  // a single-partition stream's only partition
    }
  }
};

struct offset_of_fn final {
  template <class R>
  requires has_traits_offset<R> || has_source_offset_member<R>
  constexpr offset operator()(const R& r) const noexcept {
    if constexpr (has_traits_offset<R>) {
      return record_traits<R>::offset_of(r);
    } else {
      return r.source_offset;
    }
  }
};

struct event_of_fn final {
  template <class R>
  constexpr decltype(auto) operator()(const R& r) const noexcept {
    if constexpr (has_traits_event<R>) {
      return record_traits<R>::event_of(r);
    } else if constexpr (has_event_member<R>) {
      return (r.event);
    } else {
      return (r);
    }
  }
};
}  // namespace detail

/// The source offset of a record.
inline constexpr detail::offset_of_fn offset_of{};
/// The event a record carries (the record itself when it has no `event` member).
inline constexpr detail::event_of_fn event_of{};
/// The partition a record comes from: its `source_partition` member or record_traits, and
/// partition 0 for a record of a single-partition stream.
inline constexpr detail::partition_of_fn partition_of{};

/// Anything from which the library can read a source offset.
template <class R>
concept record = requires(const R& r) {
  { offset_of(r) } -> std::same_as<offset>;
};

/// A record that says which partition it came from.
template <class R>
concept partitioned_record = record<R> &&
    (detail::has_traits_partition<R> || detail::has_source_partition_member<R>);

/// The event type carried by record type R.
template <record R>
using event_t = std::remove_cvref_t<decltype(event_of(std::declval<const R&>()))>;

}  // namespace commit_order
