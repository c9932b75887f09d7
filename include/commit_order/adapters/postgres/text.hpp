// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/text.hpp — building SQL text, messages and PostgreSQL array
// literals.
//
// Every string the adapter builds goes through concat(): the exact size is reserved once and
// each part appended (one allocation, and no `const char* + std::string&&`, which trips a
// false -Wrestrict in g++ 12 at -O3; GCC bug 105651).
//
// A unit's rows reach the server as one array per column (`unnest($1::bigint[], ...)`), in
// PostgreSQL's text array format: `{1,2,3}`, `{"a","b \"quoted\""}`. array_builder appends
// one element at a time; strings are always quoted, with `"` and `\` escaped, so no value can
// end an element or the array early.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "commit_order/detail/concat.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::postgres::detail {

/// The parts, joined in one allocation (commit_order/detail/concat.hpp says why).
using commit_order::detail::concat;

template <class>
inline constexpr bool always_false = false;

/// Appends the text form of an integer.
template <class T>
void append_integer(std::string& out, T value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

/// Appends the text form PostgreSQL reads back as exactly `value` (the shortest round-trip
/// form; NaN and the infinities by the names float8in accepts).
inline void append_double(std::string& out, double value) {
  if (std::isnan(value)) {
    out.append("NaN");
  } else if (std::isinf(value)) {
    out.append(value > 0 ? "Infinity" : "-Infinity");
  } else {
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    out.append(buffer, result.ptr);
  }
}

/// Appends `text` as a quoted element of an array literal.
inline void append_quoted(std::string& out, std::string_view text) {
  out.push_back('"');
  for (const char c : text) {
    if (c == '"' || c == '\\')
      out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}

/// The text form of one value, as a statement parameter (`scalar`) or as an element of an
/// array literal (`element`: strings quoted). Integers, enumerations, bool, floating point and
/// strings; anything else is refused at compile time by the column that holds it.
template <class T>
void append_value(std::string& out, const T& value, bool element) {
  if constexpr (std::is_enum_v<T>) {
    append_integer(out, static_cast<std::underlying_type_t<T>>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    out.push_back(value ? 't' : 'f');
  } else if constexpr (std::is_integral_v<T>) {
    append_integer(out, value);
  } else if constexpr (std::is_floating_point_v<T>) {
    append_double(out, static_cast<double>(value));
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    if (element) {
      append_quoted(out, std::string_view(value));
    } else {
      out.append(std::string_view(value));
    }
  } else {
    static_assert(part_rules::require<part_rules::postgres_column_type, always_false<T>>());
  }
}

/// Builds one array literal, element by element.
class array_builder final {
 public:
  void clear() {
    text_.clear();
    text_.push_back('{');
    count_ = 0;
  }
  template <class T>
  void add(const T& value) {
    if (count_++ != 0)
      text_.push_back(',');
    append_value(text_, value, true);
  }
  /// A NULL element.
  void add_null() {
    if (count_++ != 0)
      text_.push_back(',');
    text_.append("NULL");
  }
  /// The literal, closed; valid until the next clear() or add().
  [[nodiscard]] const char* finish() {
    text_.push_back('}');
    return text_.c_str();
  }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

 private:
  std::string text_ = "{";
  std::size_t count_ = 0;
};

}  // namespace commit_order::postgres::detail
