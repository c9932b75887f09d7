// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/detail/client.hpp — librdkafka handles, error classes, the
// configuration the library owns, and the group generation (private).
#pragma once

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/options.hpp"

namespace commit_order::kafka::detail {

// ---- owning handles ------------------------------------------------------------------------

struct handle_deleter final {
  void operator()(rd_kafka_t* rk) const noexcept { rd_kafka_destroy(rk); }
};
using handle_ptr = std::unique_ptr<rd_kafka_t, handle_deleter>;

struct conf_deleter final {
  void operator()(rd_kafka_conf_t* c) const noexcept { rd_kafka_conf_destroy(c); }
};
using conf_ptr = std::unique_ptr<rd_kafka_conf_t, conf_deleter>;

struct topic_deleter final {
  void operator()(rd_kafka_topic_t* t) const noexcept { rd_kafka_topic_destroy(t); }
};
using topic_ptr = std::unique_ptr<rd_kafka_topic_t, topic_deleter>;

struct list_deleter final {
  void operator()(rd_kafka_topic_partition_list_t* l) const noexcept {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using list_ptr = std::unique_ptr<rd_kafka_topic_partition_list_t, list_deleter>;

struct message_deleter final {
  void operator()(rd_kafka_message_t* m) const noexcept { rd_kafka_message_destroy(m); }
};
using message_ptr = std::unique_ptr<rd_kafka_message_t, message_deleter>;

struct error_deleter final {
  void operator()(rd_kafka_error_t* e) const noexcept { rd_kafka_error_destroy(e); }
};
using error_ptr = std::unique_ptr<rd_kafka_error_t, error_deleter>;

inline list_ptr make_list(int size) {
  return list_ptr(rd_kafka_topic_partition_list_new(std::max(size, 1)));
}

// ---- error classes -------------------------------------------------------------------------

/// Errors the client or a retry recovers from: the connection, a leader or a coordinator that
/// moved or is being elected, a timeout. Retried without skipping a record; never thrown.
constexpr bool is_transient(rd_kafka_resp_err_t e) noexcept {
  switch (e) {
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__WAIT_COORD:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__NODE_UPDATE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_COORDINATOR:
    case RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_PREFERRED_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED:
      return true;
    default:
      return false;
  }
}

/// Commit errors by which the coordinator says this member may not commit (stale generation,
/// not a member, a rebalance under way): the position did not move, and retrying cannot help.
constexpr bool is_refusal(rd_kafka_resp_err_t e) noexcept {
  return e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
         e == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS || e == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID;
}

/// Runs `attempt(timeout_ms)` until it succeeds, fails for good, or `budget` is spent; a
/// transient error is retried after a short backoff. Returns the last result.
template <class Attempt>
rd_kafka_resp_err_t retrying(std::chrono::milliseconds budget, Attempt&& attempt) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + budget;
  auto backoff = std::chrono::milliseconds(10);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    const rd_kafka_resp_err_t e =
        attempt(static_cast<int>(std::max<std::int64_t>(left.count(), 1)));
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR || !is_transient(e) || clock::now() + backoff >= deadline)
      return e;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

// ---- the configuration the library owns ----------------------------------------------------

inline std::string lower(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

inline std::optional<bool> as_bool(std::string_view v) {
  const std::string s = lower(v);
  if (s == "true" || s == "1")
    return true;
  if (s == "false" || s == "0")
    return false;
  return std::nullopt;
}

/// How the source's partitions are assigned.
enum class assignment_kind { manual, group };

/// The rebalance protocol the assignment strategy implies.
enum class protocol { eager, cooperative };

/// The properties as librdkafka will see them: the user's, checked against what the policy
/// needs, plus the library's own. Throws `configuration_refused` naming the property.
struct resolved_config final {
  properties props;
  protocol rebalance = protocol::eager;
  std::string group_id;
};

inline std::string unnamed_group() {
  static std::atomic<std::uint64_t> n{0};
  return "commit_order.unnamed." +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "." +
         std::to_string(n++);
}

inline resolved_config resolve(const consumer_options& o, assignment_kind kind, commit_mode mode,
                               std::chrono::milliseconds auto_commit_interval,
                               std::string_view policy_name) {
  const auto refuse = [&](const std::string& why) -> void {
    throw configuration_refused("commit_order::kafka: " + why);
  };
  if (o.topic.empty())
    refuse("consumer_options.topic is empty: name the topic to read");
  resolved_config r;
  r.props = o.config;
  const auto given = [&](std::string_view key) -> const std::string* {
    const auto it = r.props.find(key);
    return it == r.props.end() ? nullptr : &it->second;
  };
  const bool auto_commit = mode == commit_mode::auto_commit;
  const std::string policy(policy_name);

  // enable.auto.commit: the policy decides when the position is committed.
  if (const std::string* v = given("enable.auto.commit")) {
    const auto b = as_bool(*v);
    if (!b || *b != auto_commit)
      refuse("enable.auto.commit=" + *v + " contradicts the policy " + policy + ": " +
             (auto_commit ? "AutoCommit is librdkafka's own auto-commit, it must be true"
                          : "this policy commits the position itself, after (or before) the "
                            "write as its type says; librdkafka's timer would commit what was "
                            "polled, written or not -- remove the property"));
  }
  r.props["enable.auto.commit"] = auto_commit ? "true" : "false";

  // enable.auto.offset.store: librdkafka would store each message's offset as it hands it
  // out, before the application has done anything with it (librdkafka #1122). The library
  // stores what the policy says, when it says.
  if (const std::string* v = given("enable.auto.offset.store")) {
    const auto b = as_bool(*v);
    if (!b || *b)
      refuse("enable.auto.offset.store=" + *v +
             " is refused: librdkafka would store each offset as the message is polled, before "
             "it is written; the pipeline stores the position its policy says -- remove the "
             "property");
  }
  r.props["enable.auto.offset.store"] = "false";

  // auto.offset.reset: any reset but "error" silently jumps over records retention deleted
  // (earliest) or over everything unread (latest, librdkafka's default).
  if (const std::string* v = given("auto.offset.reset")) {
    if (lower(*v) != "error")
      refuse("auto.offset.reset=" + *v +
             " is refused: a reset jumps over records without a trace; with \"error\" a position "
             "retention deleted is reported as position_lost and one past the end as "
             "position_beyond_end -- remove the property");
  }
  r.props["auto.offset.reset"] = "error";

  // auto.commit.interval.ms: AutoCommit's interval is the pipeline's,
  // settings.auto_commit_interval.
  const std::string interval = std::to_string(auto_commit_interval.count());
  if (const std::string* v = given("auto.commit.interval.ms")) {
    if (!auto_commit)
      refuse("auto.commit.interval.ms=" + *v + " is set but the policy " + policy +
             " does not auto-commit: nothing would run on that interval -- remove the property");
    if (*v != interval)
      refuse("auto.commit.interval.ms=" + *v + " differs from settings.auto_commit_interval (" +
             interval +
             " ms), which the pipeline's AutoCommit timer uses: set the interval there only");
  }
  if (auto_commit)
    r.props["auto.commit.interval.ms"] = interval;

  if (const std::string* g = given("group.id"))
    r.group_id = *g;
  if (kind == assignment_kind::group) {
    if (r.group_id.empty())
      refuse("a group-managed source needs group.id");
    const std::string* strategy = given("partition.assignment.strategy");
    if (strategy == nullptr) {
      // Eager: every rebalance revokes everything, then assigns. librdkafka 2.0.2's cooperative
      // protocol can hang in close (librdkafka #4527) and its sticky assignor misbehaves when
      // ownership changes (#4252), both fixed only in later versions.
      r.props["partition.assignment.strategy"] = "range";
    } else {
      const std::string s = lower(*strategy);
      if (s == "cooperative-sticky") {
        r.rebalance = protocol::cooperative;
      } else if (s != "range" && s != "roundrobin") {
        refuse("partition.assignment.strategy=" + *strategy +
               " is not supported: use one of range (the default), roundrobin or "
               "cooperative-sticky -- a list mixing eager and cooperative assignors makes the "
               "protocol depend on the other members");
      }
    }
  } else {
    if (given("partition.assignment.strategy") != nullptr)
      refuse(
          "partition.assignment.strategy is set but this source assigns its partitions "
          "manually: no group assigns anything -- remove the property");
    // librdkafka assigns partitions only to a consumer with a group (rd_kafka_assign answers
    // _UNKNOWN_GROUP otherwise). A manual consumer never joins it; without a group.id of the
    // user's it gets one of its own, unique, and Kafka's offsets are not offered to it
    // (group_id stays empty, so offset_store refuses).
    if (r.group_id.empty())
      r.props["group.id"] = unnamed_group();
  }
  return r;
}

// ---- the group generation ------------------------------------------------------------------

/// The generation in librdkafka's serialised consumer-group metadata: "CGMDv2:" (7 bytes), the
/// int32 generation in host order, then the group id and the member id, NUL-terminated
/// (librdkafka 2.0.x, src/rdkafka_cgrp.c). The format is internal: anything else is refused.
inline std::int32_t generation_from_metadata(std::span<const std::byte> bytes,
                                             std::string_view group_id) {
  static constexpr char magic[] = {'C', 'G', 'M', 'D', 'v', '2', ':'};
  constexpr std::size_t magic_len = sizeof magic;
  constexpr std::size_t generation_len = sizeof(std::int32_t);
  if (bytes.size() < magic_len + generation_len + 1)
    throw unknown_group_metadata("it is " + std::to_string(bytes.size()) +
                                 " bytes long, shorter than the magic and a generation");
  if (std::memcmp(bytes.data(), magic, magic_len) != 0)
    throw unknown_group_metadata("it does not start with \"CGMDv2:\"");
  std::int32_t generation = 0;
  std::memcpy(&generation, bytes.data() + magic_len, generation_len);
  // The group id follows: a check that the bytes before it were the generation.
  const auto rest = bytes.subspan(magic_len + generation_len);
  const auto nul = std::ranges::find(rest, std::byte{0});
  const std::string_view found(reinterpret_cast<const char*>(rest.data()),
                               static_cast<std::size_t>(nul - rest.begin()));
  if (nul == rest.end() || found != group_id)
    throw unknown_group_metadata("the group id after the generation is not \"" +
                                 std::string(group_id) + "\"");
  return generation;
}

/// The generation of the group `rk` is a member of now (inside the rebalance callback: the
/// generation of the assignment being delivered).
inline std::int32_t read_generation(rd_kafka_t* rk, std::string_view group_id) {
  std::unique_ptr<rd_kafka_consumer_group_metadata_t, void (*)(rd_kafka_consumer_group_metadata_t*)>
      md(rd_kafka_consumer_group_metadata(rk), &rd_kafka_consumer_group_metadata_destroy);
  if (!md)
    throw unknown_group_metadata("librdkafka returned none (the consumer has no group)");
  void* buffer = nullptr;
  std::size_t size = 0;
  if (error_ptr e{rd_kafka_consumer_group_metadata_write(md.get(), &buffer, &size)})
    throw unknown_group_metadata(std::string("serialising it failed: ") +
                                 rd_kafka_error_string(e.get()));
  const auto release = [rk](void* b) { rd_kafka_mem_free(rk, b); };
  std::unique_ptr<void, decltype(release)> owned(buffer, release);
  return generation_from_metadata(std::span(static_cast<const std::byte*>(buffer), size), group_id);
}

}  // namespace commit_order::kafka::detail
