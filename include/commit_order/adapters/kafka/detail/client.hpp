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
#include <vector>

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

struct queue_deleter final {
  void operator()(rd_kafka_queue_t* q) const noexcept { rd_kafka_queue_destroy(q); }
};
using queue_ptr = std::unique_ptr<rd_kafka_queue_t, queue_deleter>;

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
    // A committed-offset read (read_committed, so require_stable) while a transaction with
    // offsets of the partition is still open: the answer comes once it ends. librdkafka 2.0.2
    // retries it inside rd_kafka_committed (measured: the broker test "a claim waits ..."); if
    // it surfaces, the adapter waits on too, rather than fail an assignment.
    case RD_KAFKA_RESP_ERR_UNSTABLE_OFFSET_COMMIT:
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

/// Refusals by which the group says it is changing hands: a rebalance under way, or a
/// generation or membership one superseded. A member rejoins by itself at its next poll; a
/// commit refused so is the world's, and passes.
constexpr bool is_rebalance(rd_kafka_resp_err_t e) noexcept {
  return e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
         e == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS;
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
/// Where librdkafka keeps a property: the global configuration, or the default topic
/// configuration (which topic-level names and `topic.`-prefixed names reach).
enum class conf_scope { global, topic };

/// A property the library decides. `value` empty: librdkafka's default must stand (a legacy or
/// deprecated property the library never sets, which no spelling may change either).
struct owned_setting final {
  std::string name;
  conf_scope scope = conf_scope::global;
  std::string value;
  std::string why;
  /// Checked, never set in the client's configuration: a legacy property the high-level
  /// consumer never reads, which librdkafka warns of at start once anything sets it. The
  /// library's value goes into a probe configuration that takes the user's properties too, so a
  /// user's spelling that contradicts the policy is refused all the same.
  bool checked_only = false;
};

struct resolved_config final {
  properties props;                  // the user's, checked, plus what the library adds
  std::vector<owned_setting> owned;  // applied first, then read back after the user's
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
  r.props.erase("enable.auto.commit");
  r.owned.push_back({"enable.auto.commit", conf_scope::global, auto_commit ? "true" : "false",
                     auto_commit ? "AutoCommit is librdkafka's own auto-commit"
                                 : "this policy commits the position itself; librdkafka's timer "
                                   "would commit what was polled, written or not"});

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
  r.props.erase("enable.auto.offset.store");
  r.owned.push_back({"enable.auto.offset.store", conf_scope::global, "false",
                     "librdkafka would store each offset as the message is polled, before it is "
                     "written"});

  // auto.offset.reset: any reset but "error" silently jumps over records retention deleted
  // (earliest) or over everything unread (latest, librdkafka's default).
  if (const std::string* v = given("auto.offset.reset")) {
    if (lower(*v) != "error")
      refuse("auto.offset.reset=" + *v +
             " is refused: a reset jumps over records without a trace; with \"error\" a position "
             "retention deleted is reported as position_lost and one past the end as "
             "position_beyond_end -- remove the property");
  }
  r.props.erase("auto.offset.reset");
  r.owned.push_back({"auto.offset.reset", conf_scope::topic, "error",
                     "any other reset jumps over records without a trace, where \"error\" "
                     "reports position_lost or position_beyond_end"});

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
  r.props.erase("auto.commit.interval.ms");
  if (auto_commit)
    r.owned.push_back({"auto.commit.interval.ms", conf_scope::global, interval,
                       "AutoCommit's interval is settings.auto_commit_interval"});
  else
    r.owned.push_back({"auto.commit.interval.ms",
                       conf_scope::global,
                       {},
                       "the policy does not auto-commit: nothing runs on that interval"});

  // isolation.level: under read_uncommitted a transactional producer's aborted records would be
  // written, and its open transactions read before they commit.
  if (const std::string* v = given("isolation.level")) {
    if (lower(*v) != "read_committed")
      refuse("isolation.level=" + *v + " is refused under the policy " + policy +
             ": records of aborted or still open transactions would be written as if they had "
             "been produced -- remove the property (read_committed is the library's)");
  }
  r.props.erase("isolation.level");
  r.owned.push_back({"isolation.level", conf_scope::global, "read_committed",
                     "records of aborted or open transactions would be written"});

  // enable.partition.eof: reaching a partition's end tells the source that the offsets after
  // the last record it handed out hold none (a transaction's markers, an aborted transaction's
  // records): the position moves over them instead of resting on a marker, where progress and
  // lag tools would count offsets no poll will ever return.
  if (const std::string* v = given("enable.partition.eof")) {
    const auto b = as_bool(*v);
    if (!b || !*b)
      refuse("enable.partition.eof=" + *v +
             " is refused: the source learns at a partition's end that the offsets after its "
             "last record are a transaction's markers, and moves the position over them -- "
             "remove the property");
  }
  r.props.erase("enable.partition.eof");
  r.owned.push_back({"enable.partition.eof", conf_scope::global, "true",
                     "the position moves over a transaction's markers at a partition's end"});

  // Legacy and deprecated spellings of what the policy decides: librdkafka keeps topic-level
  // twins (used by its legacy consumer) and an offset store method. None may be changed.
  r.owned.push_back({"enable.auto.commit", conf_scope::topic, auto_commit ? "true" : "false",
                     "the topic-level twin of enable.auto.commit follows the policy too", true});
  for (const char* legacy : {"auto.commit.interval.ms", "offset.store.method"})
    r.owned.push_back(
        {legacy, conf_scope::topic, {}, "a topic-level twin of a setting the policy decides"});
  r.owned.push_back({"offset.store.method",
                     conf_scope::global,
                     {},
                     "positions are committed to the broker, or not at all, as the policy says"});

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

// ---- the configuration as librdkafka holds it ---------------------------------------------

/// The default topic configuration of `conf`, created if there is none yet.
inline rd_kafka_topic_conf_t* default_topic_conf(rd_kafka_conf_t* conf) {
  if (rd_kafka_topic_conf_t* t = rd_kafka_conf_get_default_topic_conf(conf))
    return t;
  rd_kafka_topic_conf_t* t = rd_kafka_topic_conf_new();
  rd_kafka_conf_set_default_topic_conf(conf, t);  // takes it
  return rd_kafka_conf_get_default_topic_conf(conf);
}

/// The value librdkafka holds for `name` in `scope` (its canonical spelling: "true", "error").
inline std::string effective(rd_kafka_conf_t* conf, conf_scope scope, const std::string& name) {
  char value[512];
  std::size_t size = sizeof value;
  const rd_kafka_conf_res_t res =
      scope == conf_scope::global
          ? rd_kafka_conf_get(conf, name.c_str(), value, &size)
          : rd_kafka_topic_conf_get(default_topic_conf(conf), name.c_str(), value, &size);
  if (res != RD_KAFKA_CONF_OK)
    throw configuration_refused("commit_order::kafka: librdkafka does not know the property " +
                                name + ", which this adapter must read back");
  return std::string(value);
}

/// Sets `name=value` in `scope` of `conf`; a refusal names the property.
inline void set_property(rd_kafka_conf_t* conf, conf_scope scope, const std::string& name,
                         const std::string& value) {
  char err[512];
  const rd_kafka_conf_res_t res =
      scope == conf_scope::global
          ? rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err)
          : rd_kafka_topic_conf_set(default_topic_conf(conf), name.c_str(), value.c_str(), err,
                                    sizeof err);
  if (res != RD_KAFKA_CONF_OK)
    throw configuration_refused("commit_order::kafka: librdkafka refused " + name + "=" + value +
                                ": " + err);
}

/// The configuration librdkafka will run with: the library's settings first, then the user's,
/// then every setting the library owns read back, in the scope librdkafka keeps it. librdkafka
/// routes `topic.`-prefixed names, topic-level names and aliases to scopes the user's names do
/// not show; what it holds is what counts, so any difference from the library's value is
/// refused, naming the property, the scope and the policy.
inline conf_ptr build_conf(const resolved_config& r, std::string_view policy_name,
                           std::string_view given_in = "consumer_options.config") {
  conf_ptr conf(rd_kafka_conf_new());
  conf_ptr pristine(rd_kafka_conf_new());  // librdkafka's defaults, in its own spelling
  conf_ptr probe(rd_kafka_conf_new());     // what checked_only settings are read back from
  std::vector<std::string> wanted;
  wanted.reserve(r.owned.size());
  for (const owned_setting& s : r.owned) {
    if (s.value.empty()) {
      wanted.push_back(effective(pristine.get(), s.scope, s.name));
    } else {
      if (!s.checked_only)
        set_property(conf.get(), s.scope, s.name, s.value);
      set_property(probe.get(), s.scope, s.name, s.value);
      set_property(pristine.get(), s.scope, s.name, s.value);
      wanted.push_back(effective(pristine.get(), s.scope, s.name));
    }
  }
  for (const auto& [key, value] : r.props) {
    set_property(conf.get(), conf_scope::global, key, value);
    set_property(probe.get(), conf_scope::global, key, value);
  }
  for (std::size_t i = 0; i < r.owned.size(); ++i) {
    const owned_setting& s = r.owned[i];
    const std::string got = effective((s.checked_only ? probe : conf).get(), s.scope, s.name);
    if (got != wanted[i])
      throw configuration_refused(
          "commit_order::kafka: " +
          std::string(s.scope == conf_scope::topic ? "the topic-level property "
                                                   : "the property ") +
          s.name + " is " + got + " once " + std::string(given_in) + " is applied, but " +
          (s.value.empty() ? "it must keep librdkafka's default, " + wanted[i] + ", "
                           : "the library sets it to " + wanted[i] + " ") +
          (policy_name.empty() ? std::string("here")
                               : "under the policy " + std::string(policy_name)) +
          ": " + s.why +
          ". librdkafka also takes a property under a \"topic.\" prefix, a topic-level name or an "
          "alias -- remove the entry that sets it");
  }
  return conf;
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
