// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/mock_cluster.hpp — librdkafka's in-process mock cluster and a
// producer, for tests, examples and benchmarks.
//
// Part of the testing kit. The mock cluster speaks the real protocol on loopback ports chosen
// by the system, so each test can have its own and tests run in parallel. What librdkafka
// 2.0.2's mock does and does not do (docs/adapters.md has the details):
//   * the first join of an empty group waits 3 s (hard-coded); later rebalances wait
//     session.timeout.ms - 1 s; the first assignment is generation 2;
//   * retention is fixed: a partition keeps at most 5 MiB or 100000 message sets, and deleting
//     the oldest moves its log start (the only way to make a position lost);
//   * a group lives as long as its cluster: a new cluster is a deleted-and-recreated group
//     (its generations restart).
#pragma once

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "commit_order/adapters/kafka/codec.hpp"
#include "commit_order/adapters/kafka/detail/client.hpp"
#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/message.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::kafka {

/// Kafka protocol request kinds (API keys), to inject errors into one kind of request.
namespace api {
inline constexpr std::int16_t produce = 0;
inline constexpr std::int16_t fetch = 1;
inline constexpr std::int16_t list_offsets = 2;
inline constexpr std::int16_t metadata = 3;
inline constexpr std::int16_t offset_commit = 8;
inline constexpr std::int16_t offset_fetch = 9;
inline constexpr std::int16_t find_coordinator = 10;
inline constexpr std::int16_t join_group = 11;
inline constexpr std::int16_t heartbeat = 12;
inline constexpr std::int16_t leave_group = 13;
inline constexpr std::int16_t sync_group = 14;
}  // namespace api

/// An in-process Kafka cluster of `brokers` brokers on ephemeral loopback ports.
class mock_cluster final {
 public:
  explicit mock_cluster(int brokers = 1) {
    char err[512];
    // The cluster needs a client instance to live in; this one does nothing else.
    detail::conf_ptr conf(rd_kafka_conf_new());
    // The host never connects anywhere: keep it quiet.
    rd_kafka_conf_set(conf.get(), "log_level", "0", err, sizeof err);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err);
    if (rk == nullptr)
      throw client_error("creating the mock cluster's host", RD_KAFKA_RESP_ERR__FAIL, err);
    (void)conf.release();
    host_.reset(rk);
    mc_ = rd_kafka_mock_cluster_new(host_.get(), brokers);
    if (mc_ == nullptr)
      throw client_error("creating the mock cluster", RD_KAFKA_RESP_ERR__FAIL);
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(mc_);
  }

  mock_cluster(const mock_cluster&) = delete;
  mock_cluster& operator=(const mock_cluster&) = delete;

  /// Every client of the cluster must be gone first (a consumer closing against a destroyed
  /// cluster waits for its requests to time out).
  ~mock_cluster() {
    rd_kafka_mock_cluster_destroy(mc_);
    host_.reset();
  }

  /// "host:port,..." of the brokers.
  [[nodiscard]] const std::string& bootstraps() const noexcept { return bootstraps_; }
  /// bootstrap.servers, and reconnects quick enough for tests that drop connections.
  [[nodiscard]] properties client_config() const {
    return {{"bootstrap.servers", bootstraps_},
            {"reconnect.backoff.ms", "10"},
            {"reconnect.backoff.max.ms", "100"}};
  }
  /// client_config(), and a consumer's test-friendly timings: fetches that return within
  /// milliseconds, and retries after a failed fetch within milliseconds too.
  [[nodiscard]] properties consumer_config() const {
    properties p = client_config();
    p.emplace("fetch.wait.max.ms", "10");
    p.emplace("fetch.error.backoff.ms", "10");
    return p;
  }
  /// consumer_config(), and a group member's timings on this mock: a session long enough for
  /// the mock's 3 s first join (shorter ones never get an assignment), heartbeats every 200 ms,
  /// and max.poll.interval.ms as short as librdkafka allows (not below the session).
  [[nodiscard]] properties group_config(const std::string& group_id) const {
    properties p = consumer_config();
    p.emplace("group.id", group_id);
    p.emplace("session.timeout.ms", "4000");
    p.emplace("heartbeat.interval.ms", "200");
    p.emplace("max.poll.interval.ms", "4000");
    return p;
  }

  void create_topic(const std::string& name, int partitions, int replication = 1) {
    const auto e = rd_kafka_mock_topic_create(mc_, name.c_str(), partitions, replication);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error("creating topic " + name + " on the mock cluster", e);
  }

  /// The next `errors.size()` requests of kind `api_key` fail with these errors, in order.
  /// RD_KAFKA_RESP_ERR__TRANSPORT makes the broker drop the connection instead.
  void push_request_errors(std::int16_t api_key, std::vector<rd_kafka_resp_err_t> errors) {
    rd_kafka_mock_push_request_errors_array(mc_, api_key, errors.size(), errors.data());
  }
  void push_request_errors(std::int16_t api_key,
                           std::initializer_list<rd_kafka_resp_err_t> errors) {
    push_request_errors(api_key, std::vector<rd_kafka_resp_err_t>(errors));
  }
  void clear_request_errors(std::int16_t api_key) {
    rd_kafka_mock_clear_request_errors(mc_, api_key);
  }

  /// Disconnects a broker's clients and refuses new connections, until set_broker_up.
  void set_broker_down(std::int32_t broker) { check(rd_kafka_mock_broker_set_down(mc_, broker)); }
  void set_broker_up(std::int32_t broker) { check(rd_kafka_mock_broker_set_up(mc_, broker)); }

  [[nodiscard]] rd_kafka_mock_cluster_t* get() const noexcept { return mc_; }

 private:
  static void check(rd_kafka_resp_err_t e) {
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error("controlling the mock cluster", e);
  }

  detail::handle_ptr host_;
  rd_kafka_mock_cluster_t* mc_ = nullptr;
  std::string bootstraps_;
};

/// Writes events to a topic, each to the partition it is told. `flush()` returns once every
/// message is acknowledged, or throws naming how many were not.
template <class Event, class Codec = trivial_codec<Event>>
class producer final {
  // sizeof first: the codec is completed here, outside the concept, so a check of its own (a
  // trivial_codec's KF3) is reported from this line and not from deep inside the concept.
  static_assert(part_rules::require<part_rules::kafka_producer_codec,
                                    (sizeof(Codec) != 0 && codec<Codec, Event>)>());
  // The stand-in once the check above refused Codec, so that its message is the one error.
  using codec_type = std::conditional_t<codec<Codec, Event>, Codec, detail::refused_codec<Event>>;

 public:
  producer(const properties& config, std::string topic) : topic_(std::move(topic)) {
    char err[512];
    detail::conf_ptr conf(rd_kafka_conf_new());
    for (const auto& [key, value] : config)
      if (rd_kafka_conf_set(conf.get(), key.c_str(), value.c_str(), err, sizeof err) !=
          RD_KAFKA_CONF_OK)
        throw configuration_refused("commit_order::kafka::producer: " + key + "=" + value + ": " +
                                    err);
    rd_kafka_conf_set_opaque(conf.get(), this);
    rd_kafka_conf_set_dr_msg_cb(conf.get(), &producer::delivered);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err);
    if (rk == nullptr)
      throw configuration_refused(std::string("commit_order::kafka::producer: ") + err);
    (void)conf.release();
    rk_.reset(rk);
  }

  /// Queues `e` for partition `k` (copied; sent in the background).
  void send(partition_id k, const Event& e) {
    buffer_.clear();
    codec_type::encode(e, buffer_);
    // rd_kafka_produceva rather than the RD_KAFKA_V_* macros: those are GNU statement
    // expressions, which -Wpedantic refuses.
    rd_kafka_vu_t vu[4] = {};
    vu[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    vu[0].u.cstr = topic_.c_str();
    vu[1].vtype = RD_KAFKA_VTYPE_PARTITION;
    vu[1].u.i32 = k.value();
    vu[2].vtype = RD_KAFKA_VTYPE_VALUE;
    vu[2].u.mem.ptr = not_null(buffer_);
    vu[2].u.mem.size = buffer_.size();
    vu[3].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vu[3].u.i = RD_KAFKA_MSG_F_COPY;
    produce(vu, 4);
  }

  /// Queues `m` for partition `k` as it is, codec aside: its key, its value (none: a
  /// tombstone), its headers (in order; a header with no value is null) and its create time
  /// (none: the producer's clock; librdkafka takes a create time of 0 for none too).
  void send(partition_id k, const message_copy& m) {
    std::vector<rd_kafka_vu_t> vu(3);
    vu[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    vu[0].u.cstr = topic_.c_str();
    vu[1].vtype = RD_KAFKA_VTYPE_PARTITION;
    vu[1].u.i32 = k.value();
    vu[2].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vu[2].u.i = RD_KAFKA_MSG_F_COPY;
    const auto bytes = [&vu](rd_kafka_vtype_t type,
                             const std::optional<std::vector<std::byte>>& b) {
      // A null key or value is left out: librdkafka then sends null.
      if (!b)
        return;
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = type;
      u.u.mem.ptr = not_null(*b);
      u.u.mem.size = b->size();
    };
    bytes(RD_KAFKA_VTYPE_KEY, m.key);
    bytes(RD_KAFKA_VTYPE_VALUE, m.value);
    for (const auto& h : m.headers) {
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = RD_KAFKA_VTYPE_HEADER;
      u.u.header.name = h.name.c_str();
      u.u.header.val = h.value ? not_null(*h.value) : nullptr;
      u.u.header.size = h.value ? static_cast<ssize_t>(h.value->size()) : 0;
    }
    if (m.timestamp) {
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = RD_KAFKA_VTYPE_TIMESTAMP;
      u.u.i64 =
          std::chrono::duration_cast<std::chrono::milliseconds>(m.timestamp->at.time_since_epoch())
              .count();
    }
    produce(vu.data(), vu.size());
  }

  /// Waits until every message sent is acknowledged by the cluster.
  void flush(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto e = rd_kafka_flush(rk_.get(), static_cast<int>(timeout.count()));
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error("flushing the producer of " + topic_, e);
    if (failed_ != 0)
      throw client_error("producing to " + topic_, last_failure_,
                         std::to_string(failed_) + " of " + std::to_string(sent_) +
                             " messages were not delivered");
  }

  [[nodiscard]] std::size_t sent() const noexcept { return sent_; }

 private:
  // librdkafka sends a null pointer as null: zero bytes need an address, or an empty value
  // would become a tombstone.
  static void* not_null(const std::vector<std::byte>& b) noexcept {
    static std::byte none{};
    return b.empty() ? &none : const_cast<std::byte*>(b.data());
  }

  void produce(const rd_kafka_vu_t* vu, std::size_t n) {
    for (;;) {
      detail::error_ptr e{rd_kafka_produceva(rk_.get(), vu, n)};
      if (!e)
        break;
      if (rd_kafka_error_code(e.get()) != RD_KAFKA_RESP_ERR__QUEUE_FULL)
        throw client_error("producing to " + topic_, rd_kafka_error_code(e.get()),
                           rd_kafka_error_string(e.get()));
      rd_kafka_poll(rk_.get(), 10);  // the local queue is full: let deliveries drain it
    }
    ++sent_;
    rd_kafka_poll(rk_.get(), 0);
  }

  static void delivered(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) noexcept {
    auto* self = static_cast<producer*>(opaque);
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++self->failed_;
      self->last_failure_ = m->err;
    }
  }

  detail::handle_ptr rk_;
  std::string topic_;
  std::vector<std::byte> buffer_;
  std::size_t sent_ = 0;
  std::size_t failed_ = 0;
  rd_kafka_resp_err_t last_failure_ = RD_KAFKA_RESP_ERR_NO_ERROR;
};

}  // namespace commit_order::kafka
