// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/codec.hpp — how a message becomes an event.
//
// A codec is a type with static functions. A decoder reads either the value alone or the whole
// message (its key, headers, timestamp, partition and offset: kafka::message):
//   static Event decode(std::span<const std::byte> value);         // throws on a bad payload
//   static Event decode(const kafka::message& m);                   // or this one
//   static void encode(const Event&, std::vector<std::byte>& out);  // for producers (optional)
// The source decodes every message it hands out; a message that does not decode stops the
// source before it (`undecodable_message`), never skipped. A tombstone (a null value) never
// reaches a value decoder, which would read a delete as a value of zero bytes: it is refused the
// same way, unless the codec says what a delete is (`with_deletes`, a message decoder).
//
// Adaptors:
//   with_deletes<Event, Key, KeyCodec, ValueCodec>   tombstones become kafka::deleted<Key>: the
//                                                    event is kafka::change<Event, Key>
//   tolerant<Event, Codec>                           a message that does not decode becomes a
//                                                    kafka::decoded<Event> holding the message
//                                                    and the reason; its value() throws, so the
//                                                    pipeline's error handling decides: stop,
//                                                    retry, or dead_letter<N> (the position
//                                                    passes it once the letter is durable)
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/message.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::kafka {

/// C decodes a message's value into an Event.
template <class C, class Event>
concept value_decoder = requires(std::span<const std::byte> value) {
  { C::decode(value) } -> std::same_as<Event>;
};

/// C decodes a whole message -- key, headers, timestamp, partition, offset and value -- into an
/// Event: an event key or version can come from the message's key or a header.
template <class C, class Event>
concept message_decoder = requires(const message& m) {
  { C::decode(m) } -> std::same_as<Event>;
};

/// C decodes messages into Events, from their value or from the whole message.
template <class C, class Event>
concept decoder = value_decoder<C, Event> || message_decoder<C, Event>;

/// decoder<C, Event> as a value (a static_assert on it prints the message, not the concept).
template <class C, class Event>
inline constexpr bool decodes_v = decoder<C, Event>;

/// C also encodes an Event into a message value.
template <class C, class Event>
concept codec = decoder<C, Event> && requires(const Event& e, std::vector<std::byte>& out) {
  C::encode(e, out);
};

namespace detail {
/// The codec a part stands on once a check refused the one it was given (KF2, KF3, KF5, KF6,
/// KF7): it declares what a codec has and defines none of it, so the check's message is the one
/// error. Only a program that already failed to compile names it.
template <class T>
struct refused_codec {
  static T decode(std::span<const std::byte> value);
  static void encode(const T& v, std::vector<std::byte>& out);
};

/// C, or the stand-in once a check refused it as a decoder of T.
template <class C, class T>
using decoder_or_refused = std::conditional_t<decoder<C, T>, C, refused_codec<T>>;

/// The object representation of a trivially copyable Event, for trivial_codec.
template <class Event>
struct object_bytes {
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
}  // namespace detail

/// The object representation of a trivially copyable event, byte for byte. The bytes mean what
/// this build's layout says: keep the event a fixed-width, padding-free struct, or write a codec
/// with an explicit format for a topic other programs read or write.
template <class Event>
struct trivial_codec final
    : std::conditional_t<std::is_trivially_copyable_v<Event>, detail::object_bytes<Event>,
                         detail::refused_codec<Event>> {
  static_assert(part_rules::require<part_rules::kafka_trivial_codec_event,
                                    std::is_trivially_copyable_v<Event>>());
};

/// Decodes `m` with C: the whole message for a message decoder, the value for a value decoder.
/// A tombstone is refused by a value decoder (std::invalid_argument, which the source reports
/// as undecodable_message): read as zero bytes, a delete would become a value.
template <class Event, class C>
requires decoder<C, Event>
[[nodiscard]] Event decode(const message& m) {
  if constexpr (message_decoder<C, Event>) {
    return C::decode(m);
  } else {
    if (m.tombstone())
      throw std::invalid_argument(
          "it is a tombstone (a null value: a delete of its key), which a value codec cannot "
          "decode -- read the topic with kafka::with_deletes to receive deletes as "
          "kafka::deleted<Key>");
    return C::decode(*m.value());
  }
}

namespace detail {
/// An integer's bytes, most significant first, for big_endian_codec.
template <class T>
struct big_endian_bytes {
  static void encode(T v, std::vector<std::byte>& out) {
    const auto u = static_cast<std::make_unsigned_t<T>>(v);
    for (std::size_t i = sizeof(T); i-- > 0;)
      out.push_back(static_cast<std::byte>((u >> (8 * i)) & 0xffU));
  }
  static T decode(std::span<const std::byte> value) {
    if (value.size() != sizeof(T))
      throw std::invalid_argument("a value of " + std::to_string(value.size()) +
                                  " bytes cannot be a big-endian integer of " +
                                  std::to_string(sizeof(T)) + " bytes (big_endian_codec)");
    std::make_unsigned_t<T> u = 0;
    for (const std::byte b : value)
      u = static_cast<std::make_unsigned_t<T>>((u << 8) | std::to_integer<unsigned>(b));
    return static_cast<T>(u);
  }
};
}  // namespace detail

/// An integer in network byte order, as Kafka's Java serializers write it (LongSerializer,
/// IntegerSerializer, ShortSerializer): exactly sizeof(T) bytes, most significant first.
template <class T>
struct big_endian_codec final
    : std::conditional_t<std::integral<T>, detail::big_endian_bytes<T>, detail::refused_codec<T>> {
  static_assert(part_rules::require<part_rules::kafka_big_endian_integer, std::integral<T>>());
};

/// A string's bytes, as they are (a topic of text keys or values).
struct string_codec final {
  static void encode(const std::string& s, std::vector<std::byte>& out) {
    const std::size_t at = out.size();
    out.resize(at + s.size());
    if (!s.empty())
      std::memcpy(out.data() + at, s.data(), s.size());
  }
  static std::string decode(std::span<const std::byte> value) {
    return std::string(reinterpret_cast<const char*>(value.data()), value.size());
  }
};

// ---- deletes -----------------------------------------------------------------------------------

/// A tombstone: the key it deletes.
template <class Key>
struct deleted final {
  Key key;
  friend bool operator==(const deleted&, const deleted&) = default;
};

/// What a topic with deletes carries: an Event, or the delete of a key.
template <class Event, class Key>
using change = std::variant<Event, deleted<Key>>;

/// Reads a compacted topic's tombstones as deletes: a message with a value is an Event (decoded
/// by ValueCodec, from its value or the whole message; the message key is the ValueCodec's to
/// read, or not), a tombstone is `deleted<Key>{key}` with its key decoded by KeyCodec. KeyCodec
/// has no default: the key's bytes are in the producer's format (Java's LongSerializer writes
/// big-endian: big_endian_codec<std::int64_t>; a string key: string_codec), and a wrong guess
/// would delete another key. A tombstone with a null key deletes nothing anyone can name: it
/// stops the source (undecodable_message), never skipped.
template <class Event, class Key, class KeyCodec, class ValueCodec = trivial_codec<Event>>
struct with_deletes final {
  // sizeof first: the codec is completed here, outside the concept, so a check of its own (a
  // trivial_codec's KF3) is reported from this line and not from deep inside the concept.
  static_assert(part_rules::require<part_rules::kafka_codec_decodes,
                                    (sizeof(ValueCodec) != 0 && decoder<ValueCodec, Event>)>());
  static_assert(part_rules::require<part_rules::kafka_key_codec, value_decoder<KeyCodec, Key>>());

  static change<Event, Key> decode(const message& m) {
    if (!m.tombstone())
      return change<Event, Key>(std::in_place_index<0>, kafka::decode<Event, value_codec>(m));
    const auto key = m.key();
    if (!key)
      throw std::invalid_argument("it is a tombstone with a null key, which deletes nothing");
    return change<Event, Key>(std::in_place_index<1>, deleted<Key>{key_codec::decode(*key)});
  }

 private:
  // Stand-ins once a check above refused a codec, so that its message is the one error.
  using value_codec = detail::decoder_or_refused<ValueCodec, Event>;
  using key_codec =
      std::conditional_t<value_decoder<KeyCodec, Key>, KeyCodec, detail::refused_codec<Key>>;
};

// ---- messages that do not decode -------------------------------------------------------------

/// A message that did not decode: all of it, and why.
struct poison final {
  message_copy message;
  std::string reason;
  friend bool operator==(const poison&, const poison&) = default;
};

/// An Event, or the poison message that should have been one. A pipeline reading
/// `decoded<Event>` meets the poison in its transform: `value()` throws undecodable_message, a
/// failure of that record, which the error handling acts on -- stop names it, dead_letter<N>
/// writes the `decoded` (poison and all) to the dead-letter sink before the position passes it.
template <class Event>
class decoded final {
 public:
  decoded(Event e) noexcept(std::is_nothrow_move_constructible_v<Event>)  // NOLINT: implicit
      : v_(std::in_place_index<0>, std::move(e)) {}
  explicit decoded(poison p) : v_(std::in_place_index<1>, std::move(p)) {}

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  /// The event; throws undecodable_message, naming the message and why, for a poison one.
  [[nodiscard]] const Event& value() const {
    if (const poison* p = poisoned())
      throw undecodable_message(p->message.partition, p->message.at, p->reason);
    return *std::get_if<0>(&v_);
  }
  /// The poison message, or nullptr for an event.
  [[nodiscard]] const poison* poisoned() const noexcept { return std::get_if<1>(&v_); }

  friend bool operator==(const decoded&, const decoded&) = default;

 private:
  std::variant<Event, poison> v_;
};

/// Decodes with Codec, and turns a message Codec refuses (a tombstone included, for a value
/// codec) into a poison `decoded<Event>` instead of stopping the source. Running out of memory
/// and an infrastructure_error (a decoder's lookup that is down) are not the message's fault:
/// they still stop the source, and the message is read again.
template <class Event, class Codec = trivial_codec<Event>>
struct tolerant final {
  // sizeof first, as in with_deletes.
  static_assert(part_rules::require<part_rules::kafka_codec_decodes,
                                    (sizeof(Codec) != 0 && decoder<Codec, Event>)>());

  static decoded<Event> decode(const message& m) {
    try {
      // The stand-in once the check above refused Codec, so that its message is the one error.
      return decoded<Event>(kafka::decode<Event, detail::decoder_or_refused<Codec, Event>>(m));
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const commit_order::infrastructure_error&) {
      throw;  // the world failed (a lookup the decoder makes), not the message
    } catch (const std::exception& e) {
      return decoded<Event>(poison{message_copy::of(m), e.what()});
    }
  }
};

/// What a dead letter keeps of a `decoded<Event>` (the Letter format of
/// postgres::dead_letters): a poison message's own key and value bytes, as they were read; an
/// event that decoded and failed later (in the transform or the sink) no key, and its value as
/// Codec encodes it.
template <class Codec>
struct letter_bytes final {
  template <class Event>
  static std::optional<std::vector<std::byte>> key(const decoded<Event>& d) {
    if (const poison* p = d.poisoned())
      return p->message.key;
    return std::nullopt;
  }
  template <class Event>
  requires codec<Codec, Event>
  static std::optional<std::vector<std::byte>> value(const decoded<Event>& d) {
    if (const poison* p = d.poisoned())
      return p->message.value;
    std::vector<std::byte> out;
    Codec::encode(d.value(), out);
    return out;
  }
};

/// A transform that unwraps `decoded<Event>`: the event, or the poison's undecodable_message
/// thrown as the record's failure.
struct decoded_value final {
  template <class Event>
  const Event& operator()(const decoded<Event>& d) const {
    return d.value();
  }
};

}  // namespace commit_order::kafka
