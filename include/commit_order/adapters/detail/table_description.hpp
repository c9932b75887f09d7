// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/detail/table_description.hpp — what the SQL adapters' table
// descriptions have in common. Not a public header: users name these through sqlite:: or
// postgres::. The namespace is commit_order::adapters, not a detail one, so that a diagnostic
// about a user's table names no detail:: type.
//
// The SQLite and PostgreSQL adapters describe a sink table the same way: a table_layout of
// key_columns and value_columns of column<"name", &Event::member>. The parts that do not depend
// on the database are here, once: the template string, the identifier check, what a column and
// a layout hold, the column-name checks and the column lists every statement is built from.
// Each adapter keeps its own column, key_columns, value_columns and table_layout templates (so
// diagnostics name the adapter, and its own rules stay with it: PostgreSQL's name limit and
// column types, SQLite's partition index) and builds them on these.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "commit_order/detail/concat.hpp"
#include "commit_order/key.hpp"
#include "commit_order/part_rules.hpp"

namespace commit_order::adapters {

/// A string usable as a template argument: `column<"order_id", ...>`.
template <std::size_t N>
struct fixed_string final {
  char data[N]{};
  constexpr fixed_string(const char (&text)[N]) noexcept {  // NOLINT: implicit by design
    std::copy_n(text, N, data);
  }
  [[nodiscard]] constexpr std::string_view view() const noexcept { return {data, N - 1}; }
};

namespace detail {

using commit_order::detail::concat;

/// True for a plain SQL identifier of at most `max_length` bytes: a letter or underscore, then
/// letters, digits, underscores.
constexpr bool is_plain_identifier(std::string_view name, std::size_t max_length) noexcept {
  if (name.empty() || name.size() > max_length)
    return false;
  const auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!letter(name.front()))
    return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

template <class M>
struct member_pointer_traits;
template <class C, class T>
struct member_pointer_traits<T C::*> {
  using owner = C;
  using value = T;
};

/// What a column holds: its name and the event member. An adapter's `column` derives from it
/// and checks the name and the member's type against its database.
template <fixed_string Name, auto Member>
struct column_base {
  static constexpr std::string_view name = Name.view();
  static constexpr auto member = Member;
  using owner_type = typename member_pointer_traits<decltype(Member)>::owner;
  using value_type = typename member_pointer_traits<decltype(Member)>::value;
};

/// The idempotency key key_columns<C...> make: `key<&Event::member...>`; none for no columns,
/// which the layout refuses (SQ2, PG2), and which a refused layout stands on (`checked_columns`).
template <class... Columns>
struct key_of_columns {
  using type = commit_order::key<Columns::member...>;
};
template <>
struct key_of_columns<> {
  using type = part_rules::refused_key;
};

/// What a layout holds. An adapter's `table_layout` derives from it and checks the names.
template <fixed_string Name, class Event, class Keys, class Values, fixed_string OffsetColumn,
          fixed_string PartitionColumn>
struct table_layout_base {
  using event_type = Event;
  using keys = Keys;
  using values = Values;
  static constexpr std::string_view name = Name.view();
  static constexpr std::string_view offset_column = OffsetColumn.view();
  static constexpr std::string_view partition_column = PartitionColumn.view();
};

/// D names what every layout has (an adapter's `describes_table` adds its own checks).
template <class D>
concept names_layout_parts = requires {
  typename D::event_type;
  typename D::keys;
  typename D::values;
  { D::name } -> std::convertible_to<std::string_view>;
  { D::offset_column } -> std::convertible_to<std::string_view>;
  { D::partition_column } -> std::convertible_to<std::string_view>;
};

/// True when no two of `names`, `offset` and `partition` are equal.
template <std::size_t N>
constexpr bool names_distinct(std::array<std::string_view, N> names, std::string_view offset,
                              std::string_view partition) {
  if (offset == partition)
    return false;
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == offset || names[i] == partition)
      return false;
    for (std::size_t j = i + 1; j < N; ++j)
      if (names[i] == names[j])
        return false;
  }
  return true;
}

// Names are plain identifiers (checked at compile time), so quoting cannot be escaped; the
// quotes keep a name that is also a keyword ("order", "group", "partition") a name, and its
// case.
inline std::string quote_identifier(std::string_view identifier) {
  return concat("\"", identifier, "\"");
}

/// What a position row is bound to: `'table'`, and `, read from <source>` when the pipeline
/// named the source (identified_source); `read from <source>` for a position store told no
/// table; empty (unbound) when neither is known.
inline std::string bound_to_with_source(std::string_view table, std::string_view source) {
  if (table.empty())
    return source.empty() ? std::string() : concat("read from ", source);
  return source.empty() ? concat("'", table, "'") : concat("'", table, "', read from ", source);
}

/// The same for a position store kept in another database than the sink's table:
/// `'table' in database 'db'`, and `, read from <source>`.
inline std::string bound_to_with_source(std::string_view table, std::string_view source,
                                        std::string_view database) {
  if (table.empty() || database.empty())
    return bound_to_with_source(table, source);
  std::string out = concat("'", table, "' in database '", database, "'");
  return source.empty() ? out : concat(out, ", read from ", source);
}

/// Does a row bound to `held` vouch for what `mine` names? The same binding does; so does a
/// binding of the table alone when `mine` names that table and a source: a row written before
/// the source was named (its consumer's own, from before its source had an identity).
inline bool binding_holds(std::string_view held, std::string_view mine) {
  if (held == mine)
    return true;
  constexpr std::string_view read_from = ", read from ";
  return held.size() > 2 && held.front() == '\'' && held.back() == '\'' &&
         mine.size() > held.size() && mine.substr(0, held.size()) == held &&
         mine.substr(held.size()).starts_with(read_from);
}

/// `text` as an SQL string literal, for a statement printed in a message for an operator to run
/// (single quotes doubled; the statements the adapters send bind their values instead).
inline std::string quote_literal(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    out.push_back(c);
    if (c == '\'')
      out.push_back('\'');
  }
  out.push_back('\'');
  return out;
}

/// `each.operator()<C>()` for every column C, joined by `separator`.
template <class... C>
std::string column_list(std::string_view separator, auto&& each) {
  std::string out;
  ((out.append(out.empty() ? std::string_view() : separator),
    out.append(each.template operator()<C>())),
   ...);
  return out;
}

template <class... Columns>
struct column_pack final {};

/// The key columns K... and value columns V... of a layout, and the column lists built from
/// their names. An adapter's `all_columns<key_columns<K...>, value_columns<V...>>` derives from
/// `column_set<column_pack<K...>, column_pack<V...>>`.
template <class Keys, class Values>
struct column_set;
template <class... K, class... V>
struct column_set<column_pack<K...>, column_pack<V...>> {
  static constexpr std::size_t key_count = sizeof...(K);
  static constexpr std::size_t count = sizeof...(K) + sizeof...(V);
  static constexpr std::array<std::string_view, count> names{K::name..., V::name...};
  template <class Event>
  static constexpr bool members_of = (std::is_same_v<typename K::owner_type, Event> && ...) &&
                                     (std::is_same_v<typename V::owner_type, Event> && ...);

  static std::string key_names() {
    return column_list<K...>(", ", []<class C>() { return quote_identifier(C::name); });
  }
  static std::string all_names() {
    return column_list<K..., V...>(", ", []<class C>() { return quote_identifier(C::name); });
  }
  /// `"v1" = excluded."v1", ...`: the SET list of an upsert.
  static std::string updates() {
    return column_list<V...>(", ", []<class C>() {
      return concat(quote_identifier(C::name), " = excluded.", quote_identifier(C::name));
    });
  }
};

}  // namespace detail

}  // namespace commit_order::adapters
