// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/detail/write_modes.hpp — the write modes of the SQL adapters' table
// sinks, and the capabilities each mode declares. Not a public header: users name the modes
// through sqlite:: or postgres::, e.g. `sqlite::table_sink<D, sqlite::upsert_mode>`. The
// namespace is commit_order::adapters, not a detail one, so that a diagnostic about a user's
// sink names no detail:: type.
//
// The SQLite and PostgreSQL table sinks offer the same four modes with the same guarantees, so
// the modes, and what a sink of each mode declares to the rules, are written once here: a
// sink of either adapter in a given mode is legal under exactly the same policies.
#pragma once

#include <type_traits>

#include "commit_order/capabilities.hpp"

namespace commit_order::adapters {

/// What a keyed write compares before it overwrites a stored row: nothing (last writer wins),
/// the source offset within the row's partition, or a per-key version set by the producer.
enum class guard_kind { none, offset, version };

namespace detail {
/// The facts a sink reads off its mode: whether rows have a key, and the guard; `guarded`,
/// `partition_scoped` and `version_guarded` spell the guard as flags.
template <bool Keyed, guard_kind Guard>
struct mode_facts {
  static constexpr bool keyed = Keyed;
  static constexpr guard_kind guard = Guard;
  static constexpr bool guarded = Guard != guard_kind::none;
  static constexpr bool partition_scoped = Guard == guard_kind::offset;
  static constexpr bool version_guarded = Guard == guard_kind::version;
};
}  // namespace detail

/// Keyed upsert that only wins when the incoming record is from the row's partition and has a
/// newer offset; a key arriving from another partition is `key_moved_partition`.
struct guarded_upsert_mode final : detail::mode_facts<true, guard_kind::offset> {};
/// Keyed upsert that only wins when the event's per-key version (`Member`, set by the
/// producer, a column of the table) is newer than the row's, whatever partition either came
/// from: the guard for a stream whose partition count may change.
template <auto Member>
struct version_guarded_mode final : detail::mode_facts<true, guard_kind::version> {
  static constexpr auto member = Member;
};
/// Keyed upsert, last writer wins: a replay rewrites rows with older data until it catches up.
struct upsert_mode final : detail::mode_facts<true, guard_kind::none> {};
/// Plain INSERT into a table without a uniqueness constraint.
struct append_mode final : detail::mode_facts<false, guard_kind::none> {};

namespace detail {
template <class M>
struct is_version_guarded_mode : std::false_type {};
template <auto Member>
struct is_version_guarded_mode<version_guarded_mode<Member>> : std::true_type {};
}  // namespace detail

/// M is one of the four write modes.
template <class M>
concept write_mode = std::is_same_v<M, guarded_upsert_mode> || std::is_same_v<M, upsert_mode> ||
    std::is_same_v<M, append_mode> || detail::is_version_guarded_mode<M>::value;

namespace detail {

/// What a table sink in mode Mode declares, with the durability of its durability mode.
template <class Mode, class Durability>
struct mode_capabilities;
template <class Durability>
struct mode_capabilities<guarded_upsert_mode, Durability> {
  using type = commit_order::capabilities<Idempotent, OffsetGuarded, PartitionScoped, Transactional,
                                          Durability>;
};
template <auto Member, class Durability>
struct mode_capabilities<version_guarded_mode<Member>, Durability> {
  using type =
      commit_order::capabilities<Idempotent, VersionGuarded<Member>, Transactional, Durability>;
};
template <class Durability>
struct mode_capabilities<upsert_mode, Durability> {
  using type = commit_order::capabilities<Idempotent, Transactional, Durability>;
};
template <class Durability>
struct mode_capabilities<append_mode, Durability> {
  using type = commit_order::capabilities<Transactional, Durability>;
};

// Only keyed sinks have a key: an append sink must not look like it dedups (rule R8 and the
// `sink_key_t` trait read this alias).
template <class D, bool Keyed>
struct key_alias {};
template <class D>
struct key_alias<D, true> {
  using key_type = typename D::keys::key_type;
};

}  // namespace detail

}  // namespace commit_order::adapters
