// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/file/codec.hpp — how an event becomes the payload of a log record.
//
// A codec is a type with two static functions:
//   static void encode(const Event&, std::vector<std::byte>& out);  // appends the encoding
//   static Event decode(std::span<const std::byte> payload);        // throws on a bad payload
// The log frames, checksums and orders payloads; the codec alone knows what they mean.
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "commit_order/adapters/file/errors.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::file {

/// C encodes and decodes events of type Event.
template <class C, class Event>
concept codec = requires(const Event& e, std::vector<std::byte>& out,
                         std::span<const std::byte> payload) {
  C::encode(e, out);
  { C::decode(payload) } -> std::same_as<Event>;
};

namespace detail {
/// The object representation of a trivially copyable Event, for trivial_codec.
template <class Event>
struct object_bytes {
  static void encode(const Event& e, std::vector<std::byte>& out) {
    // resize + memcpy rather than insert: g++ 12 reports a false -Warray-bounds and
    // -Wstringop-overflow inside vector::insert once this is inlined into some callers.
    const std::size_t at = out.size();
    out.resize(at + sizeof(Event));
    std::memcpy(out.data() + at, &e, sizeof(Event));
  }

  static Event decode(std::span<const std::byte> payload) {
    // A size mismatch means the log was written for another event type: refuse to reinterpret.
    if (payload.size() != sizeof(Event))
      throw codec_error("commit_order::file::trivial_codec: a payload of " +
                        std::to_string(payload.size()) + " bytes cannot be an event of " +
                        std::to_string(sizeof(Event)) + " bytes");
    std::array<std::byte, sizeof(Event)> bytes;
    std::memcpy(bytes.data(), payload.data(), sizeof(Event));
    return std::bit_cast<Event>(bytes);
  }
};

/// The codec a part stands on once a check refused the one it was given (FL1, FL2): it declares
/// what a codec has and defines none of it, so the check's message is the one error. Only a
/// program that already failed to compile names it.
template <class Event>
struct refused_codec {
  static void encode(const Event& e, std::vector<std::byte>& out);
  static Event decode(std::span<const std::byte> payload);
};
}  // namespace detail

/// The object representation of a trivially copyable event, byte for byte. Compact and fast,
/// but the bytes mean what this build's layout says: a log written by a build with another
/// layout (another struct definition, another ABI) of the same size decodes as garbage. Keep
/// the event a fixed-width, padding-free struct, or write a codec with an explicit format.
template <class Event>
struct trivial_codec final
    : std::conditional_t<std::is_trivially_copyable_v<Event>, detail::object_bytes<Event>,
                         detail::refused_codec<Event>> {
  static_assert(part_rules::require<part_rules::file_trivial_codec_event,
                                    std::is_trivially_copyable_v<Event>>());
};

}  // namespace commit_order::file
