// SPDX-License-Identifier: BSL-1.0
// commit_order/key.hpp — the idempotency key, derived from the event and from nothing else.
//
// A key is a stateless projection of the event. `key<&order::order_id, &order::event_seq>` is
// the usual form. A generated UUID or `now()` would make a retry look like a new record — the
// commonest way a correctly ordered consumer still produces duplicates — so a key extractor
// that carries state, or that can be called without an event, is rejected (rule R8).
#pragma once

#include <concepts>
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
