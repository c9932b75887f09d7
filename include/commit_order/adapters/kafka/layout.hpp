// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/layout.hpp — how a row becomes a Kafka message, for the sinks
// that write topics (kafka::transactional_sink, kafka::topic_sink).
//
//   kafka::layout<L, Row>       the concept: topic, value; optionally key and headers
//   kafka::keyed_layout<&Row::m> every row to one topic, keyed by a member
//   kafka::header_out           one header a layout adds
//
// The producer both sinks share is here too (private): its settings, checked as librdkafka
// holds them, and the produce call.
#pragma once

#include <librdkafka/rdkafka.h>

#include <sys/types.h>
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commit_order/adapters/detail/table_description.hpp"
#include "commit_order/adapters/kafka/codec.hpp"
#include "commit_order/adapters/kafka/detail/client.hpp"
#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::kafka {

/// One message header a layout adds.
struct header_out final {
  std::string name;
  std::vector<std::byte> value;
};

/// L maps a row to the message it becomes, by const members: `topic(row)`, convertible to
/// std::string_view, and `value(row, out)`, which appends the value's bytes to a
/// std::vector<std::byte>. Optional: `key(row, out)`, the key's bytes (a layout with a key
/// member always sends a key, empty bytes included; one without sends none, null), and
/// `headers(row, out)`, which appends kafka::header_out{name, value} to a
/// std::vector<header_out>. The output partition is the partitioner's, by key (murmur2_random
/// unless the config names another: where Java's producers put the same key).
template <class L, class Row>
concept layout = requires(const L& l, const Row& r, std::vector<std::byte>& out) {
  { l.topic(r) } -> std::convertible_to<std::string_view>;
  l.value(r, out);
};

namespace detail {
template <class L, class Row>
concept layout_with_key = requires(const L& l, const Row& r, std::vector<std::byte>& out) {
  l.key(r, out);
};
template <class L, class Row>
concept layout_with_headers = requires(const L& l, const Row& r, std::vector<header_out>& out) {
  l.headers(r, out);
};
// A member named key or headers, whatever its shape (not an overload set or a template).
template <class L>
concept names_key = requires {
  &L::key;
};
template <class L>
concept names_headers = requires {
  &L::headers;
};
/// L's key and headers, where it names them, have the shape the sink calls: a near miss (not
/// const, another parameter type) would otherwise be skipped without a word.
template <class L, class Row>
concept key_called = !names_key<L> || layout_with_key<L, Row>;
template <class L, class Row>
concept headers_called = !names_headers<L> || layout_with_headers<L, Row>;
template <class L, class Row>
concept layout_members_called = key_called<L, Row> && headers_called<L, Row>;

/// The class and the type of a data member, from a pointer to it.
template <auto Member>
using member_owner_t = typename adapters::detail::member_pointer_traits<decltype(Member)>::owner;
template <auto Member>
using member_type_t = typename adapters::detail::member_pointer_traits<decltype(Member)>::value;
}  // namespace detail

/// Every row to one topic, keyed by a member of the row (the key's bytes by KeyCodec, the value's
/// by ValueCodec). `keyed_layout<&order::order_id>` keys each order by its id, in the format
/// Java's LongSerializer writes, and copies the row's bytes as its value.
template <auto Member, class ValueCodec = trivial_codec<detail::member_owner_t<Member>>,
          class KeyCodec = big_endian_codec<detail::member_type_t<Member>>>
class keyed_layout final {
 public:
  using row_type = detail::member_owner_t<Member>;

  explicit keyed_layout(std::string topic) : topic_(std::move(topic)) {}

  [[nodiscard]] std::string_view topic(const row_type&) const noexcept { return topic_; }
  void key(const row_type& r, std::vector<std::byte>& out) const {
    KeyCodec::encode(r.*Member, out);
  }
  void value(const row_type& r, std::vector<std::byte>& out) const { ValueCodec::encode(r, out); }

 private:
  std::string topic_;
};

namespace detail {

/// The settings of a producer that must not lose what it was acknowledged for: idempotent,
/// acks=all, the layout's partitioner unless the user names one, and `owned` (the sink's own:
/// transactional.id, ...). Every one is read back once the user's properties are applied, in
/// the scope librdkafka keeps it, so no spelling (a `topic.` prefix, an alias) changes it.
inline conf_ptr producer_conf(const properties& user, std::vector<owned_setting> owned,
                              std::string_view given_in) {
  resolved_config r;
  r.props = user;
  owned.push_back({"enable.idempotence", conf_scope::global, "true",
                   "the producer's retries must not write a message twice or out of order"});
  owned.push_back({"request.required.acks", conf_scope::topic, "-1",
                   "a message counts as written once every in-sync replica has it (acks=all): "
                   "the sink declares Replicated"});
  if (!user.contains("partitioner") && !user.contains("topic.partitioner"))
    r.props.emplace("partitioner", "murmur2_random");
  r.owned = std::move(owned);
  return build_conf(r, "", given_in);
}

/// Builds the message a row becomes and hands it to librdkafka (produceva), waiting while its
/// local queue is full. A message too large is the record's (message_refused, before anything
/// is sent); any other refusal is returned, for the sink to classify.
template <class Row, class Layout>
class message_writer final {
 public:
  explicit message_writer(Layout layout) : layout_(std::move(layout)) {}

  [[nodiscard]] const std::string& topic() const noexcept { return topic_; }

  /// `opaque`, when not null, is the message's in its delivery report.
  [[nodiscard]] error_ptr produce(rd_kafka_t* rk, partition_id k, offset o, const Row& row,
                                  void* opaque = nullptr) {
    value_.clear();
    layout_.value(row, value_);
    topic_ = layout_.topic(row);
    std::vector<rd_kafka_vu_t>& vu = vu_;
    vu.resize(3);
    vu[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    vu[0].u.cstr = topic_.c_str();
    vu[1].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vu[1].u.i = RD_KAFKA_MSG_F_COPY;
    vu[2].vtype = RD_KAFKA_VTYPE_VALUE;
    vu[2].u.mem.ptr = not_null(value_);
    vu[2].u.mem.size = value_.size();
    if (opaque != nullptr) {
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = RD_KAFKA_VTYPE_OPAQUE;
      u.u.ptr = opaque;
    }
    if constexpr (layout_with_key<Layout, Row>) {
      // A key, empty bytes included: librdkafka takes a null pointer for no key.
      key_.clear();
      layout_.key(row, key_);
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = RD_KAFKA_VTYPE_KEY;
      u.u.mem.ptr = not_null(key_);
      u.u.mem.size = key_.size();
    }
    if constexpr (layout_with_headers<Layout, Row>) {
      headers_.clear();
      layout_.headers(row, headers_);
      for (const header_out& h : headers_) {
        rd_kafka_vu_t& u = vu.emplace_back();
        u.vtype = RD_KAFKA_VTYPE_HEADER;
        u.u.header.name = h.name.c_str();
        u.u.header.val = not_null(h.value);
        u.u.header.size = static_cast<ssize_t>(h.value.size());
      }
    }
    for (;;) {
      error_ptr e{rd_kafka_produceva(rk, vu.data(), vu.size())};
      if (!e)
        return e;
      const rd_kafka_resp_err_t code = rd_kafka_error_code(e.get());
      if (code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        throw message_refused(k, o, code, rd_kafka_error_string(e.get()));
      if (code != RD_KAFKA_RESP_ERR__QUEUE_FULL)
        return e;
      rd_kafka_poll(rk, 10);  // the local queue is full: let deliveries drain it
    }
  }

 private:
  static void* not_null(const std::vector<std::byte>& b) noexcept {
    static std::byte none{};
    return b.empty() ? &none : const_cast<std::byte*>(b.data());
  }

  Layout layout_;
  std::vector<std::byte> key_;
  std::vector<std::byte> value_;
  std::vector<header_out> headers_;
  std::vector<rd_kafka_vu_t> vu_;
  std::string topic_;
};

}  // namespace detail
}  // namespace commit_order::kafka
