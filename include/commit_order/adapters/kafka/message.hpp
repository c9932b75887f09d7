// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/message.hpp — a consumed message as a decoder sees it.
//
// `kafka::message` is a view of one message librdkafka handed out: its partition and offset,
// its key, its value (none: a tombstone), its timestamp and its headers. It is valid only
// during the decode call it is passed to; a decoder copies what the event keeps. Kafka tells
// a null key or value from an empty one, and so does the view: `key()` and `value()` are
// empty optionals for null, and empty spans for zero bytes.
//
// `kafka::message_copy` owns the same fields: what a poison message keeps for its dead letter.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "commit_order/offset.hpp"

namespace commit_order::kafka {

using bytes_view = std::span<const std::byte>;

/// When a message was made: by its producer (create time), or by the broker when it appended
/// it (log-append time, a topic's message.timestamp.type=LogAppendTime).
struct timestamp final {
  std::chrono::system_clock::time_point at;
  bool log_append_time = false;
  friend bool operator==(const timestamp&, const timestamp&) = default;
};

/// One header of a message. A header may have a name and no value (null), as in Kafka. The
/// name is read as a C string (librdkafka's interface): a name holding a NUL byte ends there.
struct header final {
  std::string_view name;
  std::optional<bytes_view> value;
};

/// A consumed message; valid while the decode call it is passed to runs.
class message final {
 public:
  explicit message(const rd_kafka_message_t& m) noexcept : m_(&m) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_id{m_->partition}; }
  [[nodiscard]] offset at() const noexcept { return offset{m_->offset}; }
  /// The topic's name (empty when librdkafka gives none).
  [[nodiscard]] std::string_view topic() const noexcept {
    const char* name = m_->rkt != nullptr ? rd_kafka_topic_name(m_->rkt) : nullptr;
    return name != nullptr ? std::string_view(name) : std::string_view();
  }
  /// The key's bytes; none for a null key.
  [[nodiscard]] std::optional<bytes_view> key() const noexcept {
    return view(m_->key, m_->key_len);
  }
  /// The value's bytes; none for a tombstone (a null value: a delete of the key in a
  /// compacted topic).
  [[nodiscard]] std::optional<bytes_view> value() const noexcept {
    return view(m_->payload, m_->len);
  }
  [[nodiscard]] bool tombstone() const noexcept { return m_->payload == nullptr; }
  /// None when the message carries no timestamp (a message format older than Kafka 0.10).
  [[nodiscard]] std::optional<kafka::timestamp> timestamp() const noexcept {
    rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    const std::int64_t ms = rd_kafka_message_timestamp(m_, &type);
    if (type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE)
      return std::nullopt;
    return kafka::timestamp{std::chrono::system_clock::time_point(std::chrono::milliseconds(ms)),
                            type == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME};
  }

  /// How many headers the message has. Headers librdkafka cannot parse throw
  /// std::invalid_argument (the message does not decode), never read as none.
  [[nodiscard]] std::size_t header_count() const {
    const rd_kafka_headers_t* h = headers();
    return h != nullptr ? rd_kafka_header_cnt(h) : 0;
  }
  /// The i-th header, in the order the producer wrote them (i < header_count()).
  [[nodiscard]] header header_at(std::size_t i) const {
    const char* name = nullptr;
    const void* value = nullptr;
    std::size_t size = 0;
    if (const rd_kafka_headers_t* h = headers();
        h == nullptr || rd_kafka_header_get_all(h, i, &name, &value, &size) != 0)
      return header{};
    return header{name, view(value, size)};
  }
  /// The last header named `name` (Kafka allows several: the last one wins, as in Kafka's own
  /// clients' lastHeader); none when the message has no such header.
  [[nodiscard]] std::optional<header> last_header(std::string_view name) const {
    for (std::size_t i = header_count(); i-- > 0;)
      if (const header h = header_at(i); h.name == name)
        return h;
    return std::nullopt;
  }

  /// The librdkafka message itself.
  [[nodiscard]] const rd_kafka_message_t& raw() const noexcept { return *m_; }

 private:
  static std::optional<bytes_view> view(const void* data, std::size_t size) noexcept {
    if (data == nullptr)
      return std::nullopt;
    return bytes_view(static_cast<const std::byte*>(data), size);
  }
  [[nodiscard]] const rd_kafka_headers_t* headers() const {
    rd_kafka_headers_t* h = nullptr;
    // librdkafka parses the headers on first use and keeps them with the message.
    const rd_kafka_resp_err_t e = rd_kafka_message_headers(m_, &h);
    if (e == RD_KAFKA_RESP_ERR__NOENT)
      return nullptr;  // no headers
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::invalid_argument(std::string("its headers cannot be read: ") +
                                  rd_kafka_err2str(e));
    return h;
  }

  const rd_kafka_message_t* m_;
};

/// A message's fields, owned: what a dead letter keeps of a message that could not be decoded,
/// so the letter can be read, fixed and produced again byte for byte.
struct message_copy final {
  struct owned_header final {
    std::string name;
    std::optional<std::vector<std::byte>> value;
    friend bool operator==(const owned_header&, const owned_header&) = default;
  };

  std::string topic;
  partition_id partition{};
  offset at{};
  std::optional<std::vector<std::byte>> key;
  std::optional<std::vector<std::byte>> value;  ///< none: a tombstone
  std::optional<kafka::timestamp> timestamp;
  std::vector<owned_header> headers;

  [[nodiscard]] static message_copy of(const message& m) {
    message_copy c;
    c.topic = std::string(m.topic());
    c.partition = m.partition();
    c.at = m.at();
    c.key = copy(m.key());
    c.value = copy(m.value());
    c.timestamp = m.timestamp();
    c.headers.reserve(m.header_count());
    for (std::size_t i = 0; i < m.header_count(); ++i) {
      const header h = m.header_at(i);
      c.headers.push_back({std::string(h.name), copy(h.value)});
    }
    return c;
  }
  friend bool operator==(const message_copy&, const message_copy&) = default;

 private:
  static std::optional<std::vector<std::byte>> copy(std::optional<bytes_view> b) {
    if (!b)
      return std::nullopt;
    return std::vector<std::byte>(b->begin(), b->end());
  }
};

}  // namespace commit_order::kafka
