// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/json.hpp — a JSON codec for events, on nlohmann/json (Debian's
// nlohmann-json3-dev). Link commit_order::json.
//
//   struct order { std::int64_t id; std::string customer; std::int64_t cents; };
//   using order_json = json::codec<order, json::fields<json::field<"id", &order::id>,
//                                                      json::field<"customer", &order::customer>,
//                                                      json::field<"cents", &order::cents>>>;
//   kafka::group_source<order, AtLeastOnce, order_json> source(...);
//
// A codec a ledger can trust reads only what the JSON says, exactly, and refuses the rest
// (std::invalid_argument naming the field; the Kafka source reports it as
// undecodable_message, or as a poison message under kafka::tolerant):
//   * the value is one JSON object, nothing after it; a key twice in an object is refused
//     (parsers disagree on which one wins);
//   * an integer field takes a JSON integer in its type's range: 12.5, 1e3, "12", true, and
//     12.0 are refused, never truncated, rounded or wrapped;
//   * a floating-point field takes a JSON number its type holds: an integer a double would
//     round (beyond 2^53, or beyond 64 bits), a number beyond its type's range, or one so small
//     it would read as 0, is refused (a decimal fraction reads as its nearest value);
//   * no NUL byte anywhere (the parser would stop at it and ignore what follows);
//   * bool takes true/false; std::string takes a JSON string (valid UTF-8, as the parser checks);
//   * std::optional<T> takes null or a T, and a missing key as null: a field added to a topic's
//     events later reads as absent in the older ones. Every other field must be present.
// Keys the fields do not name are ignored, so producers may add fields before consumers read
// them. Encoding writes the fields in their order; a NaN or an infinity has no JSON form and is
// refused, never written as null.
#pragma once

// First: a failed check of the codec (part_rules) is then reported under a short chain of
// includes.
#include "commit_order/part_checks.hpp"

#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commit_order/adapters/detail/table_description.hpp"

namespace commit_order::json {

using adapters::fixed_string;

namespace detail {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

/// The types a field may have.
template <class T>
constexpr bool plain_supported = std::is_same_v<T, bool> || std::is_same_v<T, std::string> ||
                                 (std::is_integral_v<T> && !std::is_same_v<T, char> &&
                                  !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> &&
                                  !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t>) ||
                                 std::is_floating_point_v<T>;
template <class T>
constexpr bool supported = plain_supported<T>;
template <class T>
constexpr bool supported<std::optional<T>> = plain_supported<T>;

/// The class and the type of a member pointer (the SQL adapters' table descriptions use it too).
template <class M>
using member_of = adapters::detail::member_pointer_traits<M>;

}  // namespace detail

/// One JSON key and the member it is read into and written from.
template <fixed_string Name, auto Member>
struct field final {
  using owner = typename detail::member_of<decltype(Member)>::owner;
  using value_type = typename detail::member_of<decltype(Member)>::value;
  static constexpr std::string_view name = Name.view();
  static constexpr auto member = Member;
};

/// The fields of an event, in the order encoding writes them.
template <class... Fields>
struct fields final {
  static constexpr std::array<std::string_view, sizeof...(Fields)> names{Fields::name...};
};

namespace detail {

[[noreturn]] inline void refuse(std::string_view field, const std::string& why) {
  throw std::invalid_argument("JSON field \"" + std::string(field) + "\" " + why);
}

inline std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 40)
    s = s.substr(0, 37) + "...";
  return s;
}

template <class T>
T read_integer(std::string_view name, const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      refuse(name, "is " + shown(v) + ", out of range");
    return static_cast<T>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0)
        refuse(name, "is " + shown(v) + ", out of range");
      if (static_cast<std::uint64_t>(i) > std::numeric_limits<T>::max())
        refuse(name, "is " + shown(v) + ", out of range");
    } else {
      if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max())
        refuse(name, "is " + shown(v) + ", out of range");
    }
    return static_cast<T>(i);
  }
  refuse(name, "is " + shown(v) + ", not an integer");
}

template <class T>
T read_floating(std::string_view name, const nlohmann::json& v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if constexpr (sizeof(T) < sizeof(double)) {
      if (std::isfinite(d) && std::fabs(d) > static_cast<double>(std::numeric_limits<T>::max()))
        refuse(name, "is " + shown(v) + ", out of range");
    }
    if (!std::isfinite(d))  // the parser gives a number too large for a double as infinite
      refuse(name, "is " + shown(v) + ", out of range");
    if (d != 0 && static_cast<T>(d) == 0)
      refuse(name, "is " + shown(v) + ", too small for its type: it would read as 0");
    return static_cast<T>(d);
  }
  if (v.is_number_integer() || v.is_number_unsigned()) {
    // Taken only when the type holds the integer exactly.
    const bool negative =
        v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0;
    const std::uint64_t magnitude =
        negative ? std::uint64_t{0} - static_cast<std::uint64_t>(v.get<std::int64_t>())
                 : v.get<std::uint64_t>();
    const T t = static_cast<T>(magnitude);
    if (t >= static_cast<T>(18446744073709551616.0) || static_cast<std::uint64_t>(t) != magnitude)
      refuse(name, "is " + shown(v) + ", which this floating-point type would round");
    return negative ? -t : t;
  }
  refuse(name, "is " + shown(v) + ", not a number");
}

template <class T>
T read_plain(std::string_view name, const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean())
      refuse(name, "is " + shown(v) + ", not true or false");
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string())
      refuse(name, "is " + shown(v) + ", not a string");
    return v.get<std::string>();
  } else if constexpr (std::is_integral_v<T>) {
    return read_integer<T>(name, v);
  } else {
    return read_floating<T>(name, v);
  }
}

template <class T>
void write_plain(std::string_view name, nlohmann::json& out, const T& value) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value))
      refuse(name, "is not finite, and JSON has no form for it");
  }
  out = value;
}

template <class Field, class Event>
void read_field(const nlohmann::json& object, Event& e) {
  using T = typename Field::value_type;
  const auto it = object.find(Field::name);
  if constexpr (is_optional<T>::value) {
    if (it == object.end() || it->is_null())
      e.*Field::member = std::nullopt;
    else
      e.*Field::member = read_plain<typename T::value_type>(Field::name, *it);
  } else {
    if (it == object.end())
      refuse(Field::name, "is missing");
    e.*Field::member = read_plain<T>(Field::name, *it);
  }
}

template <class Field, class Event>
void write_field(nlohmann::json& object, const Event& e) {
  using T = typename Field::value_type;
  nlohmann::json& slot = object[std::string(Field::name)];
  if constexpr (is_optional<T>::value) {
    if (const auto& v = e.*Field::member)
      write_plain(Field::name, slot, *v);
    else
      slot = nullptr;
  } else {
    write_plain(Field::name, slot, e.*Field::member);
  }
}

/// The first pass over the text: what the parsed value no longer shows. A key twice in one
/// object (the value keeps one), an integer literal beyond 64 bits (the parser makes it a
/// double, rounded), and a literal too small for a double (it becomes 0).
class strict_checks final {
 public:
  using json = nlohmann::json;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    if (text.find_first_of(".eE") == json::string_t::npos)
      return refuse("the integer " + text + " is beyond 64 bits");
    const auto mantissa = text.substr(0, text.find_first_of("eE"));
    if (v == 0 && mantissa.find_first_of("123456789") != json::string_t::npos)
      return refuse("the number " + text + " is too small for a double");
    return true;
  }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    seen_.emplace_back();
    return true;
  }
  bool key(json::string_t& k) {
    if (!seen_.empty() && !seen_.back().insert(k).second)
      return refuse("JSON key \"" + k + "\" appears twice in one object");
    return true;
  }
  bool end_object() {
    seen_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) {
    return refuse(std::string("not JSON: ") + e.what());
  }

  [[nodiscard]] const std::string& refused() const noexcept { return refused_; }

 private:
  bool refuse(std::string why) {
    refused_ = std::move(why);
    return false;
  }
  std::vector<std::unordered_set<std::string>> seen_;
  std::string refused_;
};

/// Parses one JSON value, exactly: refuses what strict_checks finds, and a NUL byte anywhere
/// (JSON text has none; nlohmann's parser would stop reading at it and ignore what follows).
inline nlohmann::json parse_strict(std::span<const std::byte> bytes) {
  for (const std::byte b : bytes)
    if (b == std::byte{0})
      throw std::invalid_argument("not JSON: a NUL byte in the text");
  const auto* first = reinterpret_cast<const char*>(bytes.data());
  strict_checks checks;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(first, first + bytes.size(), &checks);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("not JSON this codec reads: ") + e.what());
  }
  if (!ok)
    throw std::invalid_argument(checks.refused().empty() ? std::string("not JSON")
                                                         : checks.refused());
  try {
    return nlohmann::json::parse(first, first + bytes.size());
  } catch (const nlohmann::json::exception& e) {
    // A number no double holds (1e400).
    throw std::invalid_argument(std::string("not JSON this codec reads: ") + e.what());
  }
}

/// Event{}, which decoding fills field by field. For an Event without one (which JS5 refuses) a
/// declaration only, so that the check's message is the one error.
template <class Event>
requires std::is_default_constructible_v<Event> Event empty_event() {
  return Event{};
}
template <class Event>
Event empty_event();

template <class F>
struct field_list;
template <fixed_string... Names, auto... Members>
struct field_list<fields<field<Names, Members>...>> {
  // What the codec checks is read from the template arguments, not from the field classes: one
  // mistake, one error.
  static constexpr std::size_t count = sizeof...(Members);
  template <class Event>
  static constexpr bool all_of =
      (std::is_same_v<typename member_of<decltype(Members)>::owner, Event> && ...);
  static constexpr bool supported =
      (detail::supported<typename member_of<decltype(Members)>::value> && ...);
  static constexpr bool names_distinct = [] {
    constexpr std::array<std::string_view, sizeof...(Names)> names{Names.view()...};
    for (std::size_t i = 0; i < names.size(); ++i)
      for (std::size_t j = i + 1; j < names.size(); ++j)
        if (names[i] == names[j])
          return false;
    return true;
  }();

  template <class Event>
  static void read(const nlohmann::json& object, Event& e) {
    (read_field<field<Names, Members>>(object, e), ...);
  }
  template <class Event>
  static void write(nlohmann::json& object, const Event& e) {
    (write_field<field<Names, Members>>(object, e), ...);
  }
};

}  // namespace detail

/// Where the event's object is: the whole value (default).
struct whole final {};
/// The event's object is the value of top-level key `Name` of the value: the envelope Kafka
/// Connect's JsonConverter writes with schemas.enable=true is read with member<"payload"> (the
/// "schema" beside it is not read). A value whose key is missing or not an object is refused.
template <fixed_string Name>
struct member final {
  static constexpr std::string_view name = Name.view();
};

/// Reads and writes Event as one JSON object with `Fields` (a json::fields<...>), found where
/// `At` says. Models the Kafka adapter's codec: `static Event decode(std::span<const
/// std::byte>)` and, for a whole value, `static void encode(const Event&,
/// std::vector<std::byte>&)`.
template <class Event, class Fields, class At = whole>
struct codec final {
  static_assert(
      part_rules::require<part_rules::json_no_fields, (detail::field_list<Fields>::count > 0)>());
  static_assert(part_rules::require<part_rules::json_duplicate_field,
                                    detail::field_list<Fields>::names_distinct>());
  static_assert(part_rules::require<part_rules::json_field_elsewhere,
                                    detail::field_list<Fields>::template all_of<Event>>());
  static_assert(
      part_rules::require<part_rules::json_field_type, detail::field_list<Fields>::supported>());
  static_assert(part_rules::require<part_rules::json_event_default_constructible,
                                    std::is_default_constructible_v<Event>>());

 private:
  // The fields read and written: none once a check above refused them (JS3, JS4), so that its
  // message is the one error.
  using checked =
      detail::field_list<std::conditional_t<detail::field_list<Fields>::template all_of<Event> &&
                                                detail::field_list<Fields>::supported,
                                            Fields, fields<>>>;

 public:
  static Event decode(std::span<const std::byte> value) {
    const nlohmann::json v = detail::parse_strict(value);
    if (!v.is_object())
      throw std::invalid_argument("the JSON value is " + detail::shown(v) + ", not an object");
    Event e = detail::empty_event<Event>();
    if constexpr (std::is_same_v<At, whole>) {
      checked::read(v, e);
    } else {
      const auto it = v.find(At::name);
      if (it == v.end() || !it->is_object())
        throw std::invalid_argument("the JSON value has no object at key \"" +
                                    std::string(At::name) + "\"");
      checked::read(*it, e);
    }
    return e;
  }

  static void encode(const Event& e,
                     std::vector<std::byte>& out) requires std::is_same_v<At, whole> {
    nlohmann::json object = nlohmann::json::object();
    checked::write(object, e);
    // Fields in their order: nlohmann's object sorts its keys, so the text is built here.
    std::string text = "{";
    bool first = true;
    for (const std::string_view name : Fields::names) {
      if (!first)
        text += ',';
      first = false;
      text += nlohmann::json(std::string(name)).dump();
      text += ':';
      text += object[std::string(name)].dump();
    }
    text += '}';
    const std::size_t at = out.size();
    out.resize(at + text.size());
    std::memcpy(out.data() + at, text.data(), text.size());
  }
};

}  // namespace commit_order::json
