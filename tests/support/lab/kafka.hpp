// SPDX-License-Identifier: BSL-1.0
// support/lab/kafka.hpp — the orders in a Kafka topic: of librdkafka's mock cluster, or a
// new topic on a real broker.
//
// The supervisor hosts the mock cluster (so a killed consumer takes nothing of it along), or
// creates a topic of a name of its own on the broker it is given, and produces the orders, in
// log order, into one partition: offsets are the same as the file log's, and so is the
// reconciliation. The children connect over loopback with a manual assignment (no group: a
// killed member would otherwise hold its partition until its session timed out), each policy
// with a consumer group of its own for its committed offsets.
//
// Into another topic (--sink kafka), each policy writes a topic of its own, of one partition
// (its order is the order of the writes): kafka::topic_sink under AtMostOnce and AtLeastOnce,
// kafka::transactional_sink under TransactionalPosition. The transactional child is a group
// member, as KIP-447 needs (its offsets commit inside the producer's transaction), with a
// static membership (group.instance.id): a restarted member takes its predecessor's place at
// once instead of waiting for its session to time out, and its producer, under the same
// transactional.id, aborts the transaction the kill left open.
#pragma once

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <commit_order/adapters/kafka.hpp>

#include "support/lab/orders.hpp"
#include "support/lab/policies.hpp"

namespace crash_lab {

namespace kf = commit_order::kafka;

inline const co::partition_id kafka_partition{0};

/// The consumer group whose committed offsets are policy p's position (where it keeps one) in
/// `topic`.
inline std::string kafka_group(const std::string& topic, policy_id p) {
  return "crash_lab." + topic + "." + std::string(flag_name(p));
}

/// What a consumer of the lab's topic is told.
inline kf::consumer_options kafka_options(const std::string& bootstrap, const std::string& topic,
                                          policy_id p) {
  return kf::consumer_options{.topic = topic,
                              .config = {{"bootstrap.servers", bootstrap},
                                         {"group.id", kafka_group(topic, p)},
                                         {"fetch.wait.max.ms", "10"}}};
}

/// The topic policy p writes when the lab's sink is a topic: the orders, one message per
/// applied record, keyed by order id.
inline std::string output_topic(const std::string& topic, policy_id p) {
  return topic + ".out." + std::string(flag_name(p));
}

/// The transactional.id of the TransactionalPosition child: the same for every restart, so
/// that each new producer fences its killed predecessor and aborts what it left open.
inline std::string transactional_id(const std::string& topic) {
  return "crash_lab." + topic + ".transactional";
}

/// The group member the TransactionalPosition child is (see the top of this file).
inline kf::consumer_options kafka_member_options(const std::string& bootstrap,
                                                 const std::string& topic, policy_id p) {
  kf::consumer_options o = kafka_options(bootstrap, topic, p);
  o.config["group.instance.id"] = kafka_group(topic, p) + ".member";
  o.config["session.timeout.ms"] = "6000";
  o.config["heartbeat.interval.ms"] = "500";
  return o;
}

namespace detail {

/// Creates `topic` with `partitions` partitions on the broker at `bootstrap`; throws on failure.
inline void create_topic(const std::string& bootstrap, const std::string& topic,
                         int partitions = 1) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err, sizeof err) !=
      RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(std::string("crash_lab: ") + err);
  }
  const std::unique_ptr<rd_kafka_t, decltype(&rd_kafka_destroy)> rk(
      rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err), &rd_kafka_destroy);
  if (!rk)
    throw std::runtime_error(std::string("crash_lab: ") + err);
  const std::unique_ptr<rd_kafka_queue_t, decltype(&rd_kafka_queue_destroy)> queue(
      rd_kafka_queue_new(rk.get()), &rd_kafka_queue_destroy);
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof err);
  if (nt == nullptr)
    throw std::runtime_error(std::string("crash_lab: ") + err);
  rd_kafka_CreateTopics(rk.get(), &nt, 1, nullptr, queue.get());
  rd_kafka_NewTopic_destroy(nt);
  const std::unique_ptr<rd_kafka_event_t, decltype(&rd_kafka_event_destroy)> ev(
      rd_kafka_queue_poll(queue.get(), 60000), &rd_kafka_event_destroy);
  if (!ev)
    throw std::runtime_error("crash_lab: no answer to creating the topic " + topic + " on " +
                             bootstrap);
  rd_kafka_resp_err_t e = rd_kafka_event_error(ev.get());
  std::string why = e != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_event_error_string(ev.get()) : "";
  if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::size_t n = 0;
    const auto* results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &n);
    if (n == 1 && rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      e = rd_kafka_topic_result_error(results[0]);
      why = rd_kafka_topic_result_error_string(results[0]);
    }
  }
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw std::runtime_error("crash_lab: creating the topic " + topic + " on " + bootstrap + ": " +
                             rd_kafka_err2name(e) + " " + why);
}

/// A topic name no earlier run on the same broker used.
inline std::string fresh_topic() {
  return "crash_lab.orders." + std::to_string(::getpid()) + "." +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
}

}  // namespace detail

/// The orders in a topic: of a mock cluster living in this process when `bootstrap` is empty,
/// else a new topic on the broker at `bootstrap`, written with acks=all.
class kafka_orders final {
 public:
  explicit kafka_orders(const std::vector<order_event>& events, const std::string& bootstrap = {}) {
    kf::properties producer_config;
    if (bootstrap.empty()) {
      cluster_.emplace();
      topic_ = "orders";
      cluster_->create_topic(topic_, 1);
      bootstrap_ = cluster_->bootstraps();
      producer_config = cluster_->client_config();
    } else {
      bootstrap_ = bootstrap;
      topic_ = detail::fresh_topic();
      detail::create_topic(bootstrap_, topic_);
      producer_config = {{"bootstrap.servers", bootstrap_}, {"enable.idempotence", "true"}};
    }
    kf::producer<order_event> producer(producer_config, topic_);
    for (const order_event& e : events)
      producer.send(kafka_partition, e);
    producer.flush();
  }

  [[nodiscard]] const std::string& bootstrap() const noexcept { return bootstrap_; }
  [[nodiscard]] const std::string& topic() const noexcept { return topic_; }

  /// Creates policy p's output topic (see output_topic), of one partition.
  void create_output(policy_id p) {
    if (cluster_)
      cluster_->create_topic(output_topic(topic_, p), 1);
    else
      detail::create_topic(bootstrap_, output_topic(topic_, p));
  }

  /// The position policy p's group has committed to Kafka (none yet: empty).
  [[nodiscard]] std::optional<co::position> committed(policy_id p) const {
    kf::partition_source<order_event, co::AtMostOnce<>> reader(
        kafka_options(bootstrap(), topic(), p), kafka_partition);
    return kf::partition_offset_store(reader).load();
  }

 private:
  std::optional<kf::mock_cluster> cluster_;
  std::string bootstrap_;
  std::string topic_;
};

/// What a reader of policy p's output topic is shown: its messages' events in offset order.
/// `read_committed`: what a consumer waiting for commit markers reads; otherwise every message
/// the brokers appended, aborted transactions' included. Throws if the topic cannot be read to
/// its end within a minute.
inline std::vector<order_event> read_output(const kafka_orders& orders, policy_id p,
                                            bool read_committed = true) {
  const std::string topic = output_topic(orders.topic(), p);
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const auto set = [&](const char* name, const std::string& value) {
    if (rd_kafka_conf_set(conf, name, value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(std::string("crash_lab: reading ") + topic + ": " + err);
    }
  };
  set("bootstrap.servers", orders.bootstrap());
  set("group.id", "crash_lab.reader");  // never joined nor committed: assign() only
  set("enable.auto.commit", "false");
  set("enable.partition.eof", "true");
  set("isolation.level", read_committed ? "read_committed" : "read_uncommitted");
  set("fetch.wait.max.ms", "10");
  const std::unique_ptr<rd_kafka_t, decltype(&rd_kafka_destroy)> rk(
      rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err), &rd_kafka_destroy);
  if (!rk)
    throw std::runtime_error(std::string("crash_lab: reading ") + topic + ": " + err);
  const std::unique_ptr<rd_kafka_topic_partition_list_t,
                        decltype(&rd_kafka_topic_partition_list_destroy)>
      parts(rd_kafka_topic_partition_list_new(1), &rd_kafka_topic_partition_list_destroy);
  rd_kafka_topic_partition_list_add(parts.get(), topic.c_str(), kafka_partition.value())->offset =
      RD_KAFKA_OFFSET_BEGINNING;
  if (const rd_kafka_resp_err_t e = rd_kafka_assign(rk.get(), parts.get()))
    throw std::runtime_error("crash_lab: reading " + topic + ": " + rd_kafka_err2name(e));
  std::vector<order_event> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (;;) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("crash_lab: " + topic + " was not read to its end in a minute");
    const std::unique_ptr<rd_kafka_message_t, decltype(&rd_kafka_message_destroy)> m(
        rd_kafka_consumer_poll(rk.get(), 100), &rd_kafka_message_destroy);
    if (!m)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
      break;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error("crash_lab: reading " + topic + ": " + rd_kafka_err2name(m->err));
    events.push_back(kf::trivial_codec<order_event>::decode(
        {static_cast<const std::byte*>(m->payload), m->len}));
  }
  rd_kafka_consumer_close(rk.get());
  return events;
}

}  // namespace crash_lab
