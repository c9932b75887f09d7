// commit_order/key.hpp — the idempotency key, derived from the event and from nothing else.
//
// A key is a stateless projection of the event. `key<&order::order_id, &order::event_seq>` is
// the usual form. A generated UUID or `now()` would make a retry look like a new record — the
// commonest way a correctly ordered consumer still produces duplicates — so a key extractor
// that carries state, or that can be called without an event, is rejected (rule R8).
#pragma once

#include <concepts>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace commit_order {

/// A key built from data members of the event: `key<&E::a, &E::b>` maps `e` to `tuple{e.a, e.b}`.
template <auto... Members>
requires(sizeof...(Members) > 0 &&
         (std::is_member_object_pointer_v<decltype(Members)> && ...)) struct key final {
  template <class Event>
  requires(requires(const Event& e) { (e.*Members); } && ...) constexpr auto operator()(
      const Event& e) const {
    return std::tuple<std::remove_cvref_t<decltype(e.*Members)>...>{(e.*Members)...};
  }
};

/// The "no key" marker of sinks that are not idempotent (plain append).
struct no_key final {};

/// Rule R8, as a concept: K is empty (holds no state), default-constructible (so every call
/// sees the same extractor), callable with the row, and *not* callable without it. The sink's
/// row is itself a stateless projection of the event (the transform must be stateless, rule
/// S4), so a stateless key of the row is a key derived from the event and nothing else.
template <class K, class Row>
concept stateless_key = std::is_empty_v<K> && std::default_initializable<K> &&
                        std::is_invocable_v<const K&, const Row&> &&
                        !std::is_void_v<std::invoke_result_t<const K&, const Row&>> &&
                        !std::is_invocable_v<const K&>;

namespace detail {
template <class T>
std::string key_part_text(const T& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return "'" + std::string(std::string_view(v)) + "'";
  } else {
    return "?";
  }
}
}  // namespace detail

/// A key's value as text, for error messages: `(4711, 2)` for a tuple key.
template <class K>
std::string key_text(const K& k) {
  if constexpr (requires { std::tuple_size<K>::value; }) {
    std::string out = "(";
    std::apply(
        [&out](const auto&... parts) {
          ((out += (out.size() > 1 ? ", " : "") + detail::key_part_text(parts)), ...);
        },
        k);
    return out + ")";
  } else {
    return detail::key_part_text(k);
  }
}

/// The key type a sink uses for its upserts, or `no_key`.
template <class Sink>
struct sink_key {
  using type = no_key;
};
template <class Sink>
requires requires {
  typename Sink::key_type;
}
struct sink_key<Sink> {
  using type = typename Sink::key_type;
};
template <class Sink>
using sink_key_t = typename sink_key<Sink>::type;

}  // namespace commit_order
