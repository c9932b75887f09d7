// SPDX-License-Identifier: BSL-1.0
// support/lab/supervisor.hpp — starts a consumer, SIGKILLs it at a random moment, restarts
// it, until it has been killed the requested number of times and then consumed the whole log;
// then reconciles the table against the log.
//
// When to kill: a kill has to land while the consumer is working, or it measures nothing, and
// every requested kill has to land before the log runs out, whatever the machine's speed. So
// each kill picks a random record the consumer must pass first (spread over what is left to
// read), waits for the child to report a poll past it, and then waits a random fraction of
// the time one batch takes: the kill lands at a uniformly random moment of the next unit of
// work — between two rows, inside SQLite's commit, between the rows and the position.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/lab/child.hpp"
#include "support/lab/kafka.hpp"
#include "support/lab/orders.hpp"
#include "support/lab/policies.hpp"
#include "support/lab/process.hpp"
#include "support/lab/reconcile.hpp"

namespace crash_lab {

struct lab_config {
  /// The executable whose `--child` mode runs a consumer (crash_lab itself, or a test).
  std::filesystem::path executable;
  /// Where the log, the databases and the position files go.
  std::filesystem::path work_dir;
  std::int64_t records = 2000;
  std::int64_t orders = 200;
  int kills = 10;  ///< per policy
  std::uint64_t seed = 1;
  std::size_t batch = 8;
  std::chrono::microseconds pace{250};
  std::chrono::milliseconds auto_commit{50};
  /// Where the orders are: the file log, or a Kafka topic.
  source_kind source = source_kind::file;
  /// The Kafka broker the topic is created on; empty: a mock cluster in this process.
  std::string kafka_bootstrap;
  /// Where the table lives; for PostgreSQL, the database (each policy in its own schema); or
  /// an output topic of each policy's own on the Kafka cluster the orders are in.
  sink_kind sink = sink_kind::sqlite;
  std::string pg_conninfo;
  /// Progress lines for a human; empty: quiet.
  std::function<void(const std::string&)> progress;
};

/// What one policy's run came to.
struct policy_outcome {
  policy_id policy{};
  sink_kind sink = sink_kind::sqlite;
  int kills = 0;
  int children = 0;
  std::int64_t records = 0;
  std::int64_t rows_expected = 0;
  std::int64_t rows_lost = 0;
  std::int64_t duplicate_rows = 0;
  std::int64_t regressed_rows = 0;  ///< rows seen going back to an older event, across kills
  std::int64_t replays_absorbed = 0;
  std::int64_t mismatched_rows = 0;
  /// An output topic only: messages a read_uncommitted reader is shown and a read_committed one
  /// is not (aborted transactions' attempts).
  std::int64_t aborted_messages = 0;
  /// Append table only: records each kill lost for good (in kill order).
  std::vector<std::int64_t> lost_per_kill;
  double seconds = 0;

  [[nodiscard]] std::int64_t max_lost_per_kill() const {
    return lost_per_kill.empty() ? 0 : *std::ranges::max_element(lost_per_kill);
  }
};

namespace detail {

struct run_paths {
  std::filesystem::path log_dir, database, position_file;
};

inline run_paths paths_for(const lab_config& c, policy_id p) {
  const std::string name(flag_name(p));
  return {c.work_dir / "log", c.work_dir / (name + ".sqlite"), c.work_dir / (name + ".position")};
}

// How long one poll_once() takes, as the children have reported it (replays included).
class batch_time_estimate final {
 public:
  void observe(std::chrono::steady_clock::duration d) {
    const double sample = std::chrono::duration<double>(d).count();
    seconds_ = seen_ ? 0.7 * seconds_ + 0.3 * sample : sample;
    seen_ = true;
  }
  [[nodiscard]] double seconds() const noexcept { return seconds_; }

 private:
  double seconds_ = 0.005;  // until measured
  bool seen_ = false;
};

}  // namespace detail

/// Runs one policy against the log already written in `config.work_dir / "log"`, or against
/// the Kafka topic of `kafka` (hosted by this process).
inline policy_outcome run_policy(policy_id policy, const lab_config& config,
                                 const std::vector<order_event>& log_events,
                                 kafka_orders* kafka = nullptr) {
  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  const auto paths = detail::paths_for(config, policy);
  std::filesystem::remove(paths.database);
  std::filesystem::remove(paths.position_file);
  if (config.sink == sink_kind::postgres)
    pg_reset_schema(config.pg_conninfo, policy);
  if (config.sink == sink_kind::kafka) {
    if (kafka == nullptr)
      throw std::invalid_argument("crash_lab: an output topic needs the orders in Kafka");
    const std::string_view refused = kafka_sink_refusal(policy, config.kafka_bootstrap.empty());
    if (!refused.empty())
      throw std::invalid_argument("crash_lab: " + std::string(display_name(policy)) +
                                  " does not run into a topic: " + std::string(refused));
    kafka->create_output(policy);
  }

  child_args args;
  args.policy = policy;
  args.source = kafka != nullptr ? source_kind::kafka : source_kind::file;
  if (kafka != nullptr) {
    args.bootstrap = kafka->bootstrap();
    args.topic = kafka->topic();
  }
  args.log_dir = paths.log_dir;
  args.database = paths.database;
  args.position_file = paths.position_file;
  args.batch = config.batch;
  args.pace = config.pace;
  args.auto_commit = config.auto_commit;
  args.sink = config.sink;
  args.conninfo = config.pg_conninfo;
  auto command = child_command_line(args);

  policy_outcome out;
  out.policy = policy;
  out.sink = config.sink;
  out.records = static_cast<std::int64_t>(log_events.size());
  const std::string label = "[" + std::string(display_name(policy)) + "] ";
  const auto say = [&](const std::string& text) {
    if (config.progress)
      config.progress(label + text);
  };

  std::mt19937_64 rng(config.seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<unsigned>(policy) + 1)));
  detail::batch_time_estimate batch_time;
  snapshot previous;
  std::int64_t lost_so_far = 0;
  std::function<std::optional<co::position>()> kafka_committed;
  if (kafka != nullptr)
    kafka_committed = [kafka, policy] { return kafka->committed(policy); };
  // What the policy's effects are, between two children (none is running). A transactional
  // child killed mid-transaction leaves its offsets pending until its successor's producer
  // aborts them, and until then the group's offset cannot be read (the brokers answer
  // UNSTABLE_OFFSET_COMMIT): between kills its position is not read, only at the end.
  const auto snap = [&](bool at_end) {
    if (config.sink == sink_kind::kafka)
      return topic_snapshot(
          log_events, read_output(*kafka, policy),
          at_end || policy != policy_id::transactional ? kafka->committed(policy) : std::nullopt);
    return take_snapshot(policy, config, paths.database, paths.position_file, kafka_committed);
  };
  // A table shows one row per order, which a kill can leave older than before; a topic shows
  // every message, and the reconciliation finds an order going back in it (not here).
  const bool by_snapshots = config.sink != sink_kind::kafka;

  for (;;) {
    // Each PostgreSQL consumer's sessions carry a name of their own (see the kill below).
    const std::string session = "crash_lab_" + std::to_string(out.children + 1);
    if (config.sink == sink_kind::postgres)
      command.back() = config.pg_conninfo + " application_name=" + session;
    child_process child(config.executable, command);
    ++out.children;
    std::int64_t start_position = -1;
    std::int64_t last_position = -1;
    std::optional<clock::time_point> last_at;
    const auto on_line = [&](std::string_view line) {
      if (line == "absorbed") {
        ++out.replays_absorbed;
      } else if (line.starts_with("absorbed ")) {
        out.replays_absorbed += std::stoll(std::string(line.substr(9)));
      } else if (line.starts_with("ready ")) {
        start_position = last_position = std::stoll(std::string(line.substr(6)));
      } else if (line.starts_with("at ")) {
        last_position = std::stoll(std::string(line.substr(3)));
        const auto now = clock::now();
        // Between two polls only: the first one after `ready` also waits for the source to
        // start (a Kafka consumer's first fetch), which would make the estimate, and so the
        // random delay before a kill, long enough to run past the end.
        if (last_at)
          batch_time.observe(now - *last_at);
        last_at = now;
      }
    };
    const auto wait_limit = std::chrono::seconds(120);

    if (!child.read_until(clock::now() + wait_limit, on_line,
                          [](std::string_view l) { return l.starts_with("ready "); })) {
      const exit_status st = child.kill(on_line);
      throw std::runtime_error(label + "the consumer did not start (exit code " +
                               std::to_string(st.code) + ")");
    }

    if (out.kills < config.kills) {
      // Keep two batches in reserve for every kill still to come (a kill can cost
      // AtMostOnce up to two batches of progress: the one it interrupts, committed ahead of
      // its writes, and the one the trigger waited for), so the last kill still lands before
      // the end of the log.
      const std::int64_t kills_left = config.kills - out.kills;
      const std::int64_t last_trigger =
          out.records - 2 * (kills_left + 1) * static_cast<std::int64_t>(config.batch);
      const std::int64_t span =
          std::max<std::int64_t>(0, 2 * (last_trigger - start_position) / (kills_left + 1));
      const std::int64_t trigger =
          start_position + std::uniform_int_distribution<std::int64_t>(0, span)(rng);
      if (trigger > start_position) {
        const auto passed = [&](std::string_view l) {
          return l.starts_with("at ") && std::stoll(std::string(l.substr(3))) >= trigger;
        };
        child.read_until(clock::now() + wait_limit, on_line, passed);
      }
      std::uniform_real_distribution<double> fraction(0.0, 1.0);
      const auto delay = std::chrono::microseconds(
          static_cast<std::int64_t>(fraction(rng) * batch_time.seconds() * 1e6));
      child.read_until(clock::now() + delay, on_line);
      const exit_status st = child.kill(on_line);
      // A server finishes the statement a killed client sent before it notices the client is
      // gone -- a COMMIT may still happen. The snapshot waits until the killed consumer's
      // sessions have ended, so it sees what the kill left, not a moment of it.
      if (config.sink == sink_kind::postgres)
        pg_wait_until_gone(config.pg_conninfo, session);
      if (!st.killed) {
        if (st.signalled || st.code != 0)
          throw std::runtime_error(label + "the consumer failed (exit code " +
                                   std::to_string(st.code) + ")");
        // It finished inside the delay: the log is consumed, this kill never happened.
        say("the consumer finished before kill " + std::to_string(out.kills + 1));
        break;
      }
      ++out.kills;
      const snapshot now = snap(false);
      const std::int64_t regressed = by_snapshots ? count_regressions(previous, now) : 0;
      out.regressed_rows += regressed;
      std::string note;
      if (appends(policy, config.sink)) {
        const std::int64_t skipped = count_skipped(now);
        out.lost_per_kill.push_back(skipped - lost_so_far);
        if (skipped > lost_so_far)
          note += ", " + std::to_string(skipped - lost_so_far) + " records skipped for good";
        lost_so_far = skipped;
      }
      if (regressed > 0)
        note += ", " + std::to_string(regressed) + " rows went back to older events";
      say("kill " + std::to_string(out.kills) + "/" + std::to_string(config.kills) +
          ": read up to " + std::to_string(last_position) + ", stored position " +
          (now.stored ? std::to_string(now.stored->value())
           : config.sink == sink_kind::kafka && policy == policy_id::transactional
               ? std::string("not read (a transaction may hold it)")
               : std::string("none")) +
          note);
      previous = now;
      continue;
    }

    const exit_status st = child.wait(on_line);
    if (st.signalled || st.code != 0)
      throw std::runtime_error(label + "the consumer failed (exit code " + std::to_string(st.code) +
                               ")");
    break;
  }

  const snapshot final_state = snap(true);
  if (by_snapshots)
    out.regressed_rows += count_regressions(previous, final_state);
  const reconciliation r = reconcile(policy, log_events, final_state, config.sink);
  out.regressed_rows += r.regressed_rows;
  if (config.sink == sink_kind::kafka)
    out.aborted_messages = static_cast<std::int64_t>(read_output(*kafka, policy, false).size()) -
                           static_cast<std::int64_t>(final_state.rows.size());
  out.rows_expected = r.rows_expected;
  out.rows_lost = r.rows_lost;
  out.duplicate_rows = r.duplicate_rows;
  out.mismatched_rows = r.mismatched_rows;
  out.seconds = std::chrono::duration<double>(clock::now() - started).count();
  say("consumed the log after " + std::to_string(out.kills) + " kills and " +
      std::to_string(out.children) + " starts");
  return out;
}

/// Writes the log (config.records events) — into a file log, or into a Kafka topic (of a mock
/// cluster that lives as long as the lab runs, or a new topic on config.kafka_bootstrap's
/// broker) — and runs each policy against it.
inline std::vector<policy_outcome> run_lab(const lab_config& config,
                                           const std::vector<policy_id>& policies) {
  std::filesystem::create_directories(config.work_dir);
  std::vector<policy_outcome> outcomes;
  if (config.source == source_kind::kafka) {
    const auto events = generate_orders(config.records, config.orders, config.seed);
    kafka_orders topic(events, config.kafka_bootstrap);
    for (policy_id p : policies)
      outcomes.push_back(run_policy(p, config, events, &topic));
    return outcomes;
  }
  write_orders(config.work_dir / "log", config.records, config.orders, config.seed);
  const auto events = read_orders(config.work_dir / "log");
  for (policy_id p : policies)
    outcomes.push_back(run_policy(p, config, events));
  return outcomes;
}

}  // namespace crash_lab
