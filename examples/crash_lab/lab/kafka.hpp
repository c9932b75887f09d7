// SPDX-License-Identifier: BSL-1.0
// crash_lab/lab/kafka.hpp — the orders in a topic of librdkafka's mock cluster.
//
// The supervisor hosts the cluster (so a killed consumer takes nothing of it along) and
// produces the orders, in log order, into one partition: offsets are the same as the file
// log's, and so is the reconciliation. The children connect over loopback with a manual
// assignment (no group: a killed member would otherwise hold its partition until its session
// timed out), each policy with a consumer group of its own for its committed offsets.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <commit_order/adapters/kafka.hpp>

#include "lab/orders.hpp"
#include "lab/policies.hpp"

namespace crash_lab {

namespace kf = commit_order::kafka;

inline constexpr std::string_view kafka_topic = "orders";
inline const co::partition_id kafka_partition{0};

/// The consumer group whose committed offsets are policy p's position (where it keeps one).
inline std::string kafka_group(policy_id p) {
  return "crash_lab." + std::string(flag_name(p));
}

/// What a consumer of the lab's topic is told.
inline kf::consumer_options kafka_options(const std::string& bootstrap, policy_id p) {
  return kf::consumer_options{.topic = std::string(kafka_topic),
                              .config = {{"bootstrap.servers", bootstrap},
                                         {"group.id", kafka_group(p)},
                                         {"fetch.wait.max.ms", "10"}}};
}

/// The orders in a topic of a mock cluster living in this process.
class kafka_orders final {
 public:
  explicit kafka_orders(const std::vector<order_event>& events) {
    cluster_.create_topic(std::string(kafka_topic), 1);
    kf::producer<order_event> producer(cluster_.client_config(), std::string(kafka_topic));
    for (const order_event& e : events)
      producer.send(kafka_partition, e);
    producer.flush();
  }

  [[nodiscard]] const std::string& bootstrap() const noexcept { return cluster_.bootstraps(); }

  /// The position policy p's group has committed to Kafka (none yet: empty).
  [[nodiscard]] std::optional<co::position> committed(policy_id p) const {
    kf::partition_source<order_event, co::AtMostOnce<>> reader(kafka_options(bootstrap(), p),
                                                               kafka_partition);
    return kf::partition_offset_store(reader).load();
  }

 private:
  kf::mock_cluster cluster_;
};

}  // namespace crash_lab
