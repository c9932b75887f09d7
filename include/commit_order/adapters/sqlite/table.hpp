// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/table.hpp — the typed description of a sink table.
//
// A table is described by the event members its columns hold, never by SQL text:
//
//   struct orders_flat final
//       : sqlite::table_layout<"orders_flat", order_event,
//             sqlite::key_columns<sqlite::column<"order_id", &order_event::order_id>>,
//             sqlite::value_columns<sqlite::column<"customer_id", &order_event::customer_id>,
//                                   sqlite::column<"total_cents", &order_event::total_cents>>> {};
//
// The key columns are the idempotency key: they come from the event (rule R8), and the sink's
// `key_type` is `commit_order::key<&order_event::order_id>`, so the rules check the same key
// the upsert uses. Every row also carries the partition and the source offset it came from
// (default columns `source_partition` and `source_offset`): one table can be fed by every
// partition of a stream, and the offset guard compares offsets within a partition only. Names
// are checked at compile time to be plain identifiers, and values are always bound as
// parameters, so no event content and no name can change the statement's meaning.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "commit_order/adapters/detail/table_description.hpp"
#include "commit_order/adapters/sqlite/text.hpp"
#include "commit_order/key.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::sqlite {

/// A string usable as a template argument: `column<"order_id", ...>`.
using adapters::fixed_string;

/// True for a plain SQL identifier: a letter or underscore, then letters, digits, underscores.
constexpr bool is_identifier(std::string_view name) noexcept {
  return adapters::detail::is_plain_identifier(name, 64);
}

namespace detail {
using adapters::detail::member_pointer_traits;

/// Does SQLite store a T as it is (statement::bind takes it)? Integers as INTEGER, which is
/// signed 64-bit: an unsigned 64-bit value above INT64_MAX would not come back.
template <class T>
inline constexpr bool storable = std::is_same_v<T, bool> || std::is_floating_point_v<T> ||
                                 (std::is_integral_v<T> &&
                                  (std::is_signed_v<T> || sizeof(T) < 8)) ||
                                 std::is_convertible_v<const T&, std::string_view>;
template <class T>
requires std::is_enum_v<T>
inline constexpr bool storable<T> = storable<std::underlying_type_t<T>>;

template <auto Member>
inline constexpr bool storable_member =
    storable<typename member_pointer_traits<decltype(Member)>::value>;
}  // namespace detail

/// One column: its name and the event member it holds. Its checks (SQ1, SQ5) are its
/// constraint, so they run where the column is named; each holds once reported.
template <fixed_string Name, auto Member>
requires std::is_member_object_pointer_v<decltype(Member)> &&
    (part_rules::require<part_rules::sqlite_identifier, is_identifier(Name.view())>()) &&
    (part_rules::require<part_rules::sqlite_column_type,
                         detail::storable_member<Member>>()) struct column final
    : adapters::detail::column_base<Name, Member> {
};

template <class T>
struct is_column : std::false_type {};
template <fixed_string Name, auto Member>
struct is_column<column<Name, Member>> : std::true_type {};

/// A `column<Name, Member>`.
template <class T>
concept column_type = is_column<T>::value;

/// The columns of the uniqueness constraint the upsert conflicts on: the idempotency key.
template <column_type... Columns>
struct key_columns final {
  static constexpr std::size_t size = sizeof...(Columns);
  /// The event-derived key these columns make (rule R8 reads it).
  using key_type = typename adapters::detail::key_of_columns<Columns...>::type;
};

/// The columns an upsert overwrites.
template <column_type... Columns>
struct value_columns final {
  static constexpr std::size_t size = sizeof...(Columns);
};

namespace detail {
/// The columns of Keys and Values: their names, and the lists statements are built from.
template <class Keys, class Values>
struct all_columns;
template <class... K, class... V>
struct all_columns<key_columns<K...>, value_columns<V...>>
    : adapters::detail::column_set<adapters::detail::column_pack<K...>,
                                   adapters::detail::column_pack<V...>> {
  static constexpr bool storable = (detail::storable<typename K::value_type> && ...) &&
                                   (detail::storable<typename V::value_type> && ...);
};
using adapters::detail::names_distinct;
}  // namespace detail

/// A table's layout: its name, the event its rows hold, the key and value columns, and the
/// names of the two columns every row carries beside them: the source offset and the source
/// partition it came from. It describes a table and is not one (the sinks in sink.hpp write
/// to the table it describes). Derive a named type from it (`struct orders_flat final :
/// table_layout<...> {};`) so diagnostics print the name rather than the whole description.
template <fixed_string Name, class Event, class Keys, class Values,
          fixed_string OffsetColumn = "source_offset",
          fixed_string PartitionColumn = "source_partition">
struct table_layout : adapters::detail::table_layout_base<Name, Event, Keys, Values, OffsetColumn,
                                                          PartitionColumn> {
  /// Whether the sink creates the index on (partition column, offset column) that the applied
  /// watermark of one partition reads: one seek, where a table without it is scanned whole —
  /// at every claim of a partition, under the write lock, and at every progress() call. The
  /// index is also written by every upsert (its entry moves with the offset): measured with
  /// a table in SQLite's cache (wal_normal, 256 rows per transaction), it doubles SQLite's CPU
  /// per row (about 1.6 us instead of 0.8 us); next to a Synced commit's fsync it is small
  /// (docs/adapters.md). A layout fed by one partition, written hard and rarely claimed, may
  /// turn it off by declaring `static constexpr bool partition_index = false;` in its type.
  static constexpr bool partition_index = true;

  static_assert(
      part_rules::require<part_rules::sqlite_identifier,
                          (is_identifier(Name.view()) && is_identifier(OffsetColumn.view()) &&
                           is_identifier(PartitionColumn.view()))>());
  static_assert(part_rules::require<part_rules::sqlite_empty_key, Keys::size != 0>());
  static_assert(
      part_rules::require<part_rules::sqlite_column_elsewhere,
                          detail::all_columns<Keys, Values>::template members_of<Event>>());
  static_assert(
      part_rules::require<part_rules::sqlite_duplicate_column,
                          detail::names_distinct(detail::all_columns<Keys, Values>::names,
                                                 OffsetColumn.view(), PartitionColumn.view())>());

  /// The columns the sinks read: none once a check above refused them (SQ2, SQ3, SQ5), so that
  /// the check's message is the one error and no statement is built from a refused column.
  static constexpr bool columns_checked =
      Keys::size != 0 && detail::all_columns<Keys, Values>::template members_of<Event> &&
      detail::all_columns<Keys, Values>::storable;
  using keys = std::conditional_t<columns_checked, Keys, key_columns<>>;
  using values = std::conditional_t<columns_checked, Values, value_columns<>>;
};

template <class T>
struct is_key_columns : std::false_type {};
template <class... C>
struct is_key_columns<key_columns<C...>> : std::true_type {};
template <class T>
struct is_value_columns : std::false_type {};
template <class... C>
struct is_value_columns<value_columns<C...>> : std::true_type {};

namespace detail {
// A concept of its own so that the conjunction below stays readable under clang-format 14.
template <class D>
concept names_table_parts = adapters::detail::names_layout_parts<D> && requires {
  { D::partition_index } -> std::convertible_to<bool>;
};
}  // namespace detail

/// D describes a table: `sqlite::table_layout<...>` or a type derived from one.
template <class D>
concept describes_table = detail::names_table_parts<D> && is_key_columns<typename D::keys>::value &&
    is_value_columns<typename D::values>::value;

namespace detail {

using adapters::detail::binding_holds;
using adapters::detail::bound_to_with_source;
using adapters::detail::quote_identifier;

template <class T>
constexpr std::string_view sql_type() {
  if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
    return "INTEGER";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "REAL";
  } else {
    return "TEXT";
  }
}

/// A value as a message shows it (never as SQL: values are always bound).
template <class T>
std::string value_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else {
    return concat("'", std::string_view(v), "'");
  }
}

using adapters::detail::column_list;

template <class Keys, class Values>
struct columns_of;
template <class... K, class... V>
struct columns_of<key_columns<K...>, value_columns<V...>>
    : all_columns<key_columns<K...>, value_columns<V...>> {
  static std::string definitions() {
    return column_list<K..., V...>(", ", []<class C>() {
      return concat(quote_identifier(C::name), " ", sql_type<typename C::value_type>(),
                    " NOT NULL");
    });
  }
  /// `"k1" = ?1 AND "k2" = ?2 ...`: the row of one key.
  static std::string key_match() {
    std::string out;
    int index = 0;
    ((out.append(index == 0 ? "" : " AND "),
      out.append(concat(quote_identifier(K::name), " = ?", std::to_string(++index)))),
     ...);
    return out;
  }
  /// Binds the event's members to parameters 1..count, keys first, in declaration order.
  template <class Statement, class Event>
  static void bind(Statement& s, const Event& e) {
    int index = 0;
    (s.bind(++index, e.*(K::member)), ...);
    (s.bind(++index, e.*(V::member)), ...);
  }
  /// Binds the event's key members to parameters 1..key_count (for key_match()).
  template <class Statement, class Event>
  static void bind_key(Statement& s, const Event& e) {
    int index = 0;
    (s.bind(++index, e.*(K::member)), ...);
  }
  /// The key of `e` as text, for a message: `order_id=7` or `(a=1, b='x')`.
  template <class Event>
  static std::string key_text(const Event& e) {
    std::string out;
    ((out.append(out.empty() ? "" : ", "),
      out.append(concat(K::name, "=", value_text(e.*(K::member))))),
     ...);
    return sizeof...(K) == 1 ? out : concat("(", out, ")");
  }
};

/// The name of the column of Keys/Values that holds `Member` (empty when none does).
template <auto Member, class Keys, class Values>
struct column_of;
template <auto Member, class... K, class... V>
struct column_of<Member, key_columns<K...>, value_columns<V...>> {
  template <class C>
  static constexpr bool holds() {
    if constexpr (std::is_same_v<std::remove_cv_t<decltype(C::member)>, decltype(Member)>) {
      return C::member == Member;
    } else {
      return false;
    }
  }
  static constexpr bool in_key = (holds<K>() || ...);
  static constexpr std::string_view name = [] {
    std::string_view found;
    ((found = holds<V>() ? V::name : found), ...);
    return found;
  }();
};

}  // namespace detail

}  // namespace commit_order::sqlite
