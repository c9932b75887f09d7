// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/options.hpp — what a Kafka source is told, and how a policy's
// commit trigger maps onto librdkafka's commit settings.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "commit_order/policy.hpp"

namespace commit_order::kafka {

/// librdkafka configuration properties, as the user gives them ("bootstrap.servers",
/// "group.id", "session.timeout.ms", ...). The properties the policy decides are the library's:
/// a contradicting value is refused (configuration_refused), never overridden.
using properties = std::map<std::string, std::string, std::less<>>;

/// A transient error the client recovered from or is retrying (a dropped connection, a leader
/// that moved): reported, never thrown.
struct transient_error final {
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string reason;
};

struct consumer_options final {
  /// The topic to read.
  std::string topic;
  /// librdkafka properties. bootstrap.servers is needed; group.id for a group-managed source
  /// and for Kafka's committed offsets as the position store.
  properties config{};
  /// How long a poll waits for the first message of a batch when none is there yet.
  std::chrono::milliseconds poll_wait{100};
  /// How long a request the adapter makes itself (watermarks, metadata, committed offsets, a
  /// synchronous commit) is retried through transient errors before it fails.
  std::chrono::milliseconds request_timeout{10000};
  /// Called, on the polling thread, for every transient error (optional).
  std::function<void(const transient_error&)> on_transient_error{};
};

/// Who commits the position to Kafka's offsets: the position store, when the pipeline says so
/// (explicit), or librdkafka's own timer (AutoCommit).
enum class commit_mode {
  explicit_commits,  ///< enable.auto.commit=false: the store commits synchronously
  auto_commit,       ///< enable.auto.commit=true: the store hands positions to librdkafka's timer
};

/// The commit mode of policy P: librdkafka's auto-commit exactly when P's executed order moves
/// the position on a timer (AtMostOnce<AutoCommit>).
template <policy P>
inline constexpr commit_mode commit_mode_of =
    policy_facts_v<P>.position_on_timer ? commit_mode::auto_commit : commit_mode::explicit_commits;

}  // namespace commit_order::kafka
