// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/codec.hpp — how a message's value becomes an event.
//
// A codec is a type with static functions:
//   static Event decode(std::span<const std::byte> value);         // throws on a bad payload
//   static void encode(const Event&, std::vector<std::byte>& out);  // for producers (optional)
// The source decodes every message it hands out; a payload that does not decode stops the
// source before that message (`undecodable_message`), never skipped.
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace commit_order::kafka {

/// C decodes a message value into an Event.
template <class C, class Event>
concept decoder = requires(std::span<const std::byte> value) {
  { C::decode(value) } -> std::same_as<Event>;
};

/// C also encodes an Event into a message value.
template <class C, class Event>
concept codec = decoder<C, Event> && requires(const Event& e, std::vector<std::byte>& out) {
  C::encode(e, out);
};

/// The object representation of a trivially copyable event, byte for byte. The bytes mean what
/// this build's layout says: keep the event a fixed-width, padding-free struct, or write a codec
/// with an explicit format for a topic other programs read or write.
template <class Event>
requires std::is_trivially_copyable_v<Event>
struct trivial_codec final {
  static void encode(const Event& e, std::vector<std::byte>& out) {
    // resize + memcpy rather than insert: g++ 12 warns falsely (-Warray-bounds) on a vector
    // insert of a fixed-size range at -O2.
    const std::size_t at = out.size();
    out.resize(at + sizeof(Event));
    std::memcpy(out.data() + at, &e, sizeof(Event));
  }

  static Event decode(std::span<const std::byte> value) {
    // A size mismatch means the topic carries another event type: refuse to reinterpret.
    if (value.size() != sizeof(Event))
      throw std::invalid_argument("a value of " + std::to_string(value.size()) +
                                  " bytes cannot be an event of " + std::to_string(sizeof(Event)) +
                                  " bytes (trivial_codec)");
    std::array<std::byte, sizeof(Event)> bytes;
    std::memcpy(bytes.data(), value.data(), sizeof(Event));
    return std::bit_cast<Event>(bytes);
  }
};

}  // namespace commit_order::kafka
