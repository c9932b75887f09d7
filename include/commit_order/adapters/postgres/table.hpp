// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/table.hpp — the typed description of a PostgreSQL sink table.
//
// As with the SQLite adapter, a table is described by the event members its columns hold,
// never by SQL text:
//
//   struct orders_flat final
//       : postgres::table_layout<"orders_flat", order_event,
//             postgres::key_columns<postgres::column<"order_id", &order_event::order_id>>,
//             postgres::value_columns<
//                 postgres::column<"customer_id", &order_event::customer_id>,
//                 postgres::column<"total_cents", &order_event::total_cents>>> {};
//
// The key columns are the idempotency key (rule R8 reads `key_type`). Every row also carries
// the partition and the source offset it came from (default columns `source_partition` and
// `source_offset`): the offset guard compares offsets within one partition, so one table can
// be fed by every partition of a stream, and the recovery check reads the highest offset of a
// partition through an index on (source_partition, source_offset). Names are checked at
// compile time to be plain identifiers and are always quoted; values always travel as
// parameters, so no event content and no name can change a statement's meaning.
//
// Column types: bool BOOLEAN; integers (and enumerations, by their underlying type) of up to
// 32 bits INTEGER, 64 bits BIGINT (an unsigned 64-bit member is refused: BIGINT is signed);
// float and double DOUBLE PRECISION; strings TEXT. Every column is NOT NULL.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "commit_order/adapters/detail/table_description.hpp"
#include "commit_order/adapters/postgres/text.hpp"
#include "commit_order/key.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::postgres {

/// A string usable as a template argument: `column<"order_id", ...>`.
using adapters::fixed_string;

/// True for a plain SQL identifier PostgreSQL keeps whole: a letter or underscore, then
/// letters, digits, underscores; at most 63 bytes (longer names are cut by the server).
constexpr bool is_identifier(std::string_view name) noexcept {
  return adapters::detail::is_plain_identifier(name, 63);
}

namespace detail {
using adapters::detail::member_pointer_traits;

/// The PostgreSQL type a member of type T is stored as, and its array type.
template <class T>
struct pg_type {
  static constexpr bool supported = false;
};
template <class T>
requires std::is_enum_v<T>
struct pg_type<T> : pg_type<std::underlying_type_t<T>> {
};
template <>
struct pg_type<bool> {
  static constexpr bool supported = true;
  static constexpr std::string_view name = "BOOLEAN";
  static constexpr std::string_view array = "boolean[]";
};
template <class T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) struct pg_type<T> {
  static constexpr bool supported = sizeof(T) < 8 || std::is_signed_v<T>;
  static constexpr bool narrow = sizeof(T) < 4 || (sizeof(T) == 4 && std::is_signed_v<T>);
  static constexpr std::string_view name = narrow ? "INTEGER" : "BIGINT";
  static constexpr std::string_view array = narrow ? "integer[]" : "bigint[]";
};
template <class T>
requires std::is_floating_point_v<T>
struct pg_type<T> {
  static constexpr bool supported = true;
  static constexpr std::string_view name = "DOUBLE PRECISION";
  static constexpr std::string_view array = "double precision[]";
};
template <class T>
requires(!std::is_arithmetic_v<T> && !std::is_enum_v<T> &&
         std::is_convertible_v<const T&, std::string_view>) struct pg_type<T> {
  static constexpr bool supported = true;
  static constexpr std::string_view name = "TEXT";
  static constexpr std::string_view array = "text[]";
};
}  // namespace detail

namespace detail {
template <auto Member>
inline constexpr bool storable_member =
    pg_type<typename member_pointer_traits<decltype(Member)>::value>::supported;
}  // namespace detail

/// One column: its name and the event member it holds. Its checks (PG1, PG5) are its
/// constraint, so they run where the column is named; each holds once reported.
template <fixed_string Name, auto Member>
requires std::is_member_object_pointer_v<decltype(Member)> &&
    (part_rules::require<part_rules::postgres_identifier, is_identifier(Name.view())>()) &&
    (part_rules::require<part_rules::postgres_column_type,
                         detail::storable_member<Member>>()) struct column final
    : adapters::detail::column_base<Name, Member> {
};

template <class T>
struct is_column : std::false_type {};
template <fixed_string Name, auto Member>
struct is_column<column<Name, Member>> : std::true_type {};

/// The columns of the uniqueness constraint the upsert conflicts on: the idempotency key.
template <class... Columns>
requires(is_column<Columns>::value&&...) struct key_columns final {
  static constexpr std::size_t size = sizeof...(Columns);
  /// The event-derived key these columns make (rule R8 reads it).
  using key_type = typename adapters::detail::key_of_columns<Columns...>::type;
};

/// The columns an upsert overwrites.
template <class... Columns>
requires(is_column<Columns>::value&&...) struct value_columns final {
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
  static constexpr bool storable = (pg_type<typename K::value_type>::supported && ...) &&
                                   (pg_type<typename V::value_type>::supported && ...);
};
using adapters::detail::names_distinct;
}  // namespace detail

/// A table's layout: its name, the event its rows hold, the key and value columns, and the
/// names of the two columns every row carries besides (its source offset and partition). It
/// describes a table and is not one (the sinks in sink.hpp write the table it describes).
/// Derive a named type from it so diagnostics print the name rather than the description.
template <fixed_string Name, class Event, class Keys, class Values,
          fixed_string OffsetColumn = "source_offset",
          fixed_string PartitionColumn = "source_partition">
struct table_layout : adapters::detail::table_layout_base<Name, Event, Keys, Values, OffsetColumn,
                                                          PartitionColumn> {
  static_assert(
      part_rules::require<part_rules::postgres_identifier,
                          (is_identifier(Name.view()) && is_identifier(OffsetColumn.view()) &&
                           is_identifier(PartitionColumn.view()))>());
  static_assert(part_rules::require<part_rules::postgres_empty_key, Keys::size != 0>());
  static_assert(
      part_rules::require<part_rules::postgres_column_elsewhere,
                          detail::all_columns<Keys, Values>::template members_of<Event>>());
  static_assert(
      part_rules::require<part_rules::postgres_duplicate_column,
                          detail::names_distinct(detail::all_columns<Keys, Values>::names,
                                                 OffsetColumn.view(), PartitionColumn.view())>());

  /// The columns the sinks read: none once a check above refused them (PG2, PG3, PG5), so that
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

/// D describes a table: `postgres::table_layout<...>` or a type derived from one.
template <class D>
concept describes_table = adapters::detail::names_layout_parts<D> &&
    is_key_columns<typename D::keys>::value && is_value_columns<typename D::values>::value;

namespace detail {

using adapters::detail::binding_holds;
using adapters::detail::bound_to_with_source;
using adapters::detail::column_list;
using adapters::detail::quote_identifier;
using adapters::detail::quote_literal;

template <class Keys, class Values>
struct columns_of;
template <class... K, class... V>
struct columns_of<key_columns<K...>, value_columns<V...>>
    : all_columns<key_columns<K...>, value_columns<V...>> {
  static std::string definitions() {
    return column_list<K..., V...>(", ", []<class C>() {
      return concat(quote_identifier(C::name), " ", pg_type<typename C::value_type>::name,
                    " NOT NULL");
    });
  }
  /// `$first::bigint[], $first+1::text[], ...`: one array parameter per column.
  static std::string array_parameters(int first) {
    int index = first;
    return column_list<K..., V...>(", ", [&index]<class C>() {
      std::string p = "$";
      append_integer(p, index++);
      return concat(p, "::", pg_type<typename C::value_type>::array);
    });
  }
  /// The same for the key columns only.
  static std::string key_array_parameters(int first) {
    int index = first;
    return column_list<K...>(", ", [&index]<class C>() {
      std::string p = "$";
      append_integer(p, index++);
      return concat(p, "::", pg_type<typename C::value_type>::array);
    });
  }
  /// `t."k1" = u."k1" AND ...`.
  static std::string key_join(std::string_view left, std::string_view right) {
    return column_list<K...>(" AND ", [&]<class C>() {
      return concat(left, ".", quote_identifier(C::name), " = ", right, ".",
                    quote_identifier(C::name));
    });
  }

  /// Appends row `e`'s values to one array per column, keys first, in declaration order.
  template <class Event>
  static void add_to(array_builder* arrays, const Event& e) {
    std::size_t i = 0;
    (arrays[i++].add(e.*(K::member)), ...);
    (arrays[i++].add(e.*(V::member)), ...);
  }
  /// Appends the key of `e` to one array per key column.
  template <class Event>
  static void add_key_to(array_builder* arrays, const Event& e) {
    std::size_t i = 0;
    (arrays[i++].add(e.*(K::member)), ...);
  }
  /// The key of `e` as a tuple of references (compared to find a key repeated in a unit).
  template <class Event>
  static auto key_of(const Event& e) {
    return std::tie(e.*(K::member)...);
  }
  /// Orders two events' keys as PostgreSQL compares the columns: a unit's rows of one key are
  /// those the database takes for one row. Floating point follows float8's equality: NaN
  /// equals NaN (and sorts above every other value), -0 equals +0 -- where `<` finds NaN
  /// neither below nor above anything, and rows with distinct keys would collapse into one.
  template <class Event>
  static bool key_less(const Event& a, const Event& b) {
    int c = 0;
    ((c = c != 0 ? c : compare_as_database(a.*(K::member), b.*(K::member))), ...);
    return c < 0;
  }
  template <class T>
  static int compare_as_database(const T& a, const T& b) {
    if constexpr (std::is_floating_point_v<T>) {
      const bool a_nan = std::isnan(a);
      const bool b_nan = std::isnan(b);
      if (a_nan || b_nan)
        return a_nan == b_nan ? 0 : (a_nan ? 1 : -1);
    }
    return a < b ? -1 : (b < a ? 1 : 0);
  }
  /// The key of `e` as text, for messages: `(order_id=17)`.
  template <class Event>
  static std::string key_text(const Event& e) {
    std::string out = "(";
    bool first = true;
    (
        [&] {
          if (!first)
            out.append(", ");
          first = false;
          out.append(K::name);
          out.push_back('=');
          append_value(out, e.*(K::member), false);
        }(),
        ...);
    out.push_back(')');
    return out;
  }
  /// True when a string value of `e` holds a NUL byte, which no PostgreSQL text can store.
  template <class Event>
  static bool has_nul(const Event& e) {
    bool found = false;
    (check_nul(e.*(K::member), found), ...);
    (check_nul(e.*(V::member), found), ...);
    return found;
  }

 private:
  template <class T>
  static void check_nul(const T& value, bool& found) {
    if constexpr (!std::is_arithmetic_v<T> && !std::is_enum_v<T>) {
      found = found || std::string_view(value).find('\0') != std::string_view::npos;
    }
  }
};

}  // namespace detail

}  // namespace commit_order::postgres
