// SPDX-License-Identifier: BSL-1.0
// support/lab/child.hpp — the consumer process the supervisor starts and kills.
//
//   <exe> --child <policy> <source> <log dir | bootstrap servers> <database> <position file>
//         <batch> <pace µs> <interval ms> <sink: sqlite|postgres|kafka> <topic, or ->
//         <PostgreSQL connection, or ->
//
// It recovers, consumes the log (or the Kafka topic) to its end through the policy's pipeline,
// and exits 0. It
// tells the supervisor what it does on stdout, one line per event, written with write(2) so
// that a line is in the pipe the moment the step it reports has happened, even if SIGKILL
// arrives next:
//   ready <position>     recovered; consuming from <position>
//   at <position>        a poll_once() finished; the read position is <position>
//   absorbed [<n>]       the offset guard kept a newer row (a replay, absorbed); n rows at once
//                        when the PostgreSQL sink reports them as its unit commits
//   done <position>      consumed to the end of the log
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <commit_order/adapters/kafka/topic_sink.hpp>
#include <commit_order/adapters/kafka/transactional_sink.hpp>
#include <commit_order/adapters/memory/forwarding_sink.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/kafka.hpp"
#include "support/lab/orders.hpp"
#include "support/lab/pg_lab.hpp"
#include "support/lab/policies.hpp"

namespace crash_lab {

/// What the child is told on its command line.
struct child_args {
  policy_id policy = policy_id::transactional;
  source_kind source = source_kind::file;
  std::filesystem::path log_dir;
  std::string bootstrap;  ///< the Kafka cluster's, for source_kind::kafka
  std::string topic;      ///< the topic there
  std::filesystem::path database;
  std::filesystem::path position_file;
  std::size_t batch = 8;
  std::chrono::microseconds pace{0};
  std::chrono::milliseconds auto_commit{50};
  sink_kind sink = sink_kind::sqlite;
  /// The PostgreSQL database (sink_kind::postgres).
  std::string conninfo;
};

inline constexpr std::string_view child_flag = "--child";

/// True when argv asks for the child mode.
inline bool is_child_invocation(int argc, char** argv) {
  return argc > 1 && std::string_view(argv[1]) == child_flag;
}

/// The command line of a child (without the executable).
inline std::vector<std::string> child_command_line(const child_args& a) {
  return {std::string(child_flag),
          std::string(flag_name(a.policy)),
          std::string(source_name(a.source)),
          a.source == source_kind::kafka ? a.bootstrap : a.log_dir.string(),
          a.database.string(),
          a.position_file.string(),
          std::to_string(a.batch),
          std::to_string(a.pace.count()),
          std::to_string(a.auto_commit.count()),
          std::string(flag_name(a.sink)),
          a.topic.empty() ? std::string("-") : a.topic,
          a.conninfo.empty() ? std::string("-") : a.conninfo};
}

/// Reports to the supervisor through file descriptor 1.
class reporter final {
 public:
  void line(std::string_view what, std::optional<std::int64_t> value = std::nullopt) const {
    std::string text(what);
    if (value)
      text += " " + std::to_string(*value);
    text += "\n";
    std::string_view rest = text;
    while (!rest.empty()) {
      const ::ssize_t n = ::write(1, rest.data(), rest.size());
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        std::exit(4);  // the supervisor is gone: nobody is left to report to
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  }
};

/// The sink under test, with a pause before each write that stands for the work of
/// transforming a record. The pause widens the gaps between the policy's steps so the
/// supervisor's random kills land inside units of work (between two rows of a batch, between
/// the rows and the position commit) rather than only inside SQLite's fsync. Everything else —
/// the capabilities the rules read, the key, the transactions — is the real sink's, forwarded
/// by memory::forwarding_sink (which owns the sink, built from the trailing arguments).
template <class Sink>
class paced final : public co::memory::forwarding_sink<Sink> {
 public:
  template <class... Args>
  paced(std::chrono::microseconds pace, const reporter& report, Args&&... args)
      : co::memory::forwarding_sink<Sink>(std::forward<Args>(args)...)
      , pace_(pace)
      , report_(&report) {}

  co::write_outcome apply(co::offset source_offset, const order_event& row) {
    if (pace_.count() > 0)
      std::this_thread::sleep_for(pace_);
    const co::write_outcome outcome = this->inner().apply(co::partition_id{0}, source_offset, row);
    if (outcome == co::write_outcome::absorbed)
      report_->line("absorbed");
    return outcome;
  }

 private:
  std::chrono::microseconds pace_;
  const reporter* report_;
};

/// The same pause before each message of a topic sink (a sink of partitioned rows, so the
/// group-managed source of the transactional child can write it). A topic sink reports no
/// absorbed write: a replay appends.
template <class Sink>
class paced_topic final : public co::memory::forwarding_sink<Sink> {
 public:
  template <class... Args>
  explicit paced_topic(std::chrono::microseconds pace, Args&&... args)
      : co::memory::forwarding_sink<Sink>(std::forward<Args>(args)...), pace_(pace) {}

  void apply(co::partition_id k, co::offset source_offset, const order_event& row) {
    if (pace_.count() > 0)
      std::this_thread::sleep_for(pace_);
    this->inner().apply(k, source_offset, row);
  }

 private:
  std::chrono::microseconds pace_;
};

namespace detail {

inline sq::sink_options lab_sink_options() {
  return sq::sink_options{.stream = std::string(stream_name)};
}

// Consumes to `end`. A file log that returns nothing is at its end; a Kafka poll can come back
// empty while the next fetch is on its way, so it is given time (and a deadline).
template <class Pipeline>
int drive(Pipeline& pipeline, co::position end, source_kind source, const reporter& report) {
  using clock = std::chrono::steady_clock;
  report.line("ready", pipeline.recover().value());
  auto last_progress = clock::now();
  while (pipeline.read_position() < end) {
    if (pipeline.poll_once() != 0) {
      report.line("at", pipeline.read_position().value());
      last_progress = clock::now();
    } else if (source == source_kind::file ||
               clock::now() - last_progress > std::chrono::seconds(30)) {
      break;
    }
  }
  if (pipeline.read_position() != end) {
    std::cerr << "crash_lab child: stopped at " << pipeline.read_position()
              << " before the end of the log " << end << "\n";
    return 3;
  }
  report.line("done", pipeline.read_position().value());
  return 0;
}

// The same for a group member: its partition arrives with the assignment, inside a poll, so
// it is ready once the pipeline has claimed partition 0 (until then a poll hands out nothing).
template <class Pipeline, class Source>
int drive_member(Pipeline& pipeline, Source& source, const reporter& report) {
  using clock = std::chrono::steady_clock;
  (void)pipeline.recover();
  const auto joined = [&] {
    const auto a = source.assignment();
    return std::ranges::find(a, kafka_partition) != a.end();
  };
  const auto join_deadline = clock::now() + std::chrono::seconds(60);
  std::size_t first = 0;
  while (!joined()) {
    if (clock::now() > join_deadline) {
      std::cerr << "crash_lab child: no assignment of partition 0 within a minute\n";
      return 3;
    }
    first += pipeline.poll_once();
  }
  const co::position end = source.end(kafka_partition);
  report.line("ready",
              pipeline.read_position(kafka_partition).value() - static_cast<std::int64_t>(first));
  if (first != 0)
    report.line("at", pipeline.read_position(kafka_partition).value());
  auto last_progress = clock::now();
  while (pipeline.read_position(kafka_partition) < end) {
    if (pipeline.poll_once() != 0) {
      report.line("at", pipeline.read_position(kafka_partition).value());
      last_progress = clock::now();
    } else if (clock::now() - last_progress > std::chrono::seconds(30)) {
      break;
    }
  }
  if (pipeline.read_position(kafka_partition) != end) {
    std::cerr << "crash_lab child: stopped at " << pipeline.read_position(kafka_partition)
              << " before the end of the topic " << end << "\n";
    return 3;
  }
  report.line("done", pipeline.read_position(kafka_partition).value());
  source.close();
  return 0;
}

}  // namespace detail

/// Consumes the file log under the policy `a.policy` into SQLite; returns the process exit code.
inline int run_file_child(const child_args& a) {
  const reporter report;
  order_log log(a.log_dir, lab_log_options());
  const co::settings settings{.batch_size = a.batch, .auto_commit_interval = a.auto_commit};
  const co::position end = log.end();
  switch (a.policy) {
    case policy_id::at_most_once_auto: {
      using sink_t = paced<sq::upsert_sink<orders_flat>>;
      using store_t = sq::position_store<>;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      store_t store(a.database, sq::store_options{.stream = std::string(stream_name)});
      co::pipeline<order_log, sink_t, co::AtMostOnce<co::AutoCommit>, co::with_store<store_t>> p(
          log, sink, store, settings);
      return detail::drive(p, end, a.source, report);
    }
    case policy_id::at_most_once: {
      using sink_t = paced<sq::append_sink<orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtMostOnce<>, co::with_store<store_t>> p(log, sink, store,
                                                                                   settings);
      return detail::drive(p, end, a.source, report);
    }
    case policy_id::at_least_once: {
      using sink_t = paced<sq::guarded_upsert_sink<orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<store_t>> p(
          log, sink, store, settings);
      return detail::drive(p, end, a.source, report);
    }
    case policy_id::transactional: {
      using sink_t = paced<sq::guarded_upsert_sink<orders_flat>>;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink, settings);
      return detail::drive(p, end, a.source, report);
    }
  }
  return 2;
}

/// Consumes the Kafka topic under the policy `a.policy` (the sinks are the file log's; the
/// positions are where policies.hpp's position_in_kafka says); returns the exit code.
inline int run_kafka_child(const child_args& a) {
  const reporter report;
  const co::settings settings{.batch_size = a.batch, .auto_commit_interval = a.auto_commit};
  const auto options = kafka_options(a.bootstrap, a.topic, a.policy);
  switch (a.policy) {
    case policy_id::at_most_once_auto: {
      // librdkafka's own auto-commit: enable.auto.commit=true, every auto_commit ms.
      using policy_t = co::AtMostOnce<co::AutoCommit>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = paced<sq::upsert_sink<orders_flat>>;
      source_t source(options, kafka_partition, settings);
      kf::partition_offset_store store(source);
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      co::pipeline<source_t, sink_t, policy_t, co::with_store<kf::partition_offset_store>> p(
          source, sink, store, settings);
      return detail::drive(p, source.end(), a.source, report);
    }
    case policy_id::at_most_once: {
      using policy_t = co::AtMostOnce<>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = paced<sq::append_sink<orders_flat>>;
      source_t source(options, kafka_partition, settings);
      kf::partition_offset_store store(source);
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      co::pipeline<source_t, sink_t, policy_t, co::with_store<kf::partition_offset_store>> p(
          source, sink, store, settings);
      return detail::drive(p, source.end(), a.source, report);
    }
    case policy_id::at_least_once: {
      using policy_t = co::AtLeastOnce<>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = paced<sq::guarded_upsert_sink<orders_flat>>;
      using store_t = co::file::position_store;
      source_t source(options, kafka_partition, settings);
      store_t store(a.position_file);
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      co::pipeline<source_t, sink_t, policy_t, co::with_store<store_t>> p(source, sink, store,
                                                                          settings);
      return detail::drive(p, source.end(), a.source, report);
    }
    case policy_id::transactional: {
      using policy_t = co::TransactionalPosition<>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = paced<sq::guarded_upsert_sink<orders_flat>>;
      source_t source(options, kafka_partition, settings);
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      co::pipeline<source_t, sink_t, policy_t> p(source, sink, settings);
      return detail::drive(p, source.end(), a.source, report);
    }
  }
  return 2;
}

/// The same into PostgreSQL (see pg_lab.hpp).
inline int run_child_postgres(const child_args& a) {
  const reporter report;
  order_log log(a.log_dir, lab_log_options());
  const co::settings settings{.batch_size = a.batch, .auto_commit_interval = a.auto_commit};
  const auto options = pg_sink_options(a.policy);
  switch (a.policy) {
    case policy_id::at_most_once_auto: {
      using sink_t = pg_paced<pgl::upsert_sink<pg_orders_flat>>;
      using store_t = pgl::position_store<>;
      sink_t sink(a.pace, report, a.conninfo, options);
      store_t store(a.conninfo, pg_store_options(a.policy));
      co::pipeline<order_log, sink_t, co::AtMostOnce<co::AutoCommit>, co::with_store<store_t>> p(
          log, sink, store, settings);
      return detail::drive(p, log.end(), a.source, report);
    }
    case policy_id::at_most_once: {
      using sink_t = pg_paced<pgl::append_sink<pg_orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.conninfo, options);
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtMostOnce<>, co::with_store<store_t>> p(log, sink, store,
                                                                                   settings);
      return detail::drive(p, log.end(), a.source, report);
    }
    case policy_id::at_least_once: {
      using sink_t = pg_paced<pgl::guarded_upsert_sink<pg_orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.conninfo, options);
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<store_t>> p(
          log, sink, store, settings);
      return detail::drive(p, log.end(), a.source, report);
    }
    case policy_id::transactional: {
      using sink_t = pg_paced<pgl::guarded_upsert_sink<pg_orders_flat>>;
      sink_t sink(a.pace, report, a.conninfo, options);
      co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink, settings);
      return detail::drive(p, log.end(), a.source, report);
    }
  }
  return 2;
}

/// Consumes the Kafka topic into PostgreSQL under the policy `a.policy`, the positions where
/// the file log's PostgreSQL runs keep them except that the AtMostOnce policies keep theirs in
/// Kafka, as the SQLite runs from Kafka do; returns the exit code.
inline int run_kafka_child_postgres(const child_args& a) {
  const reporter report;
  const co::settings settings{.batch_size = a.batch, .auto_commit_interval = a.auto_commit};
  const auto options = kafka_options(a.bootstrap, a.topic, a.policy);
  const auto sink_options = pg_sink_options(a.policy);
  switch (a.policy) {
    case policy_id::at_most_once_auto: {
      using policy_t = co::AtMostOnce<co::AutoCommit>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = pg_paced<pgl::upsert_sink<pg_orders_flat>>;
      source_t source(options, kafka_partition, settings);
      kf::partition_offset_store store(source);
      sink_t sink(a.pace, report, a.conninfo, sink_options);
      co::pipeline<source_t, sink_t, policy_t, co::with_store<kf::partition_offset_store>> p(
          source, sink, store, settings);
      return detail::drive(p, source.end(), a.source, report);
    }
    case policy_id::at_most_once: {
      using policy_t = co::AtMostOnce<>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = pg_paced<pgl::append_sink<pg_orders_flat>>;
      source_t source(options, kafka_partition, settings);
      kf::partition_offset_store store(source);
      sink_t sink(a.pace, report, a.conninfo, sink_options);
      co::pipeline<source_t, sink_t, policy_t, co::with_store<kf::partition_offset_store>> p(
          source, sink, store, settings);
      return detail::drive(p, source.end(), a.source, report);
    }
    case policy_id::at_least_once: {
      using policy_t = co::AtLeastOnce<>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = pg_paced<pgl::guarded_upsert_sink<pg_orders_flat>>;
      using store_t = co::file::position_store;
      source_t source(options, kafka_partition, settings);
      store_t store(a.position_file);
      sink_t sink(a.pace, report, a.conninfo, sink_options);
      co::pipeline<source_t, sink_t, policy_t, co::with_store<store_t>> p(source, sink, store,
                                                                          settings);
      return detail::drive(p, source.end(), a.source, report);
    }
    case policy_id::transactional: {
      using policy_t = co::TransactionalPosition<>;
      using source_t = kf::partition_source<order_event, policy_t>;
      using sink_t = pg_paced<pgl::guarded_upsert_sink<pg_orders_flat>>;
      source_t source(options, kafka_partition, settings);
      sink_t sink(a.pace, report, a.conninfo, sink_options);
      co::pipeline<source_t, sink_t, policy_t> p(source, sink, settings);
      return detail::drive(p, source.end(), a.source, report);
    }
  }
  return 2;
}

namespace detail {
/// The topic sink (at least once) under `Policy`, with the positions in Kafka's committed
/// offsets, stored before the write or after the brokers acknowledged it, as the policy orders.
template <class Policy, class Layout>
int run_into_topic(const child_args& a, const Layout& layout,
                   const kf::topic_sink_options& sink_options, const co::settings& settings,
                   const reporter& report) {
  using source_t = kf::partition_source<order_event, Policy>;
  using sink_t = paced_topic<kf::topic_sink<order_event, Layout>>;
  source_t source(kafka_options(a.bootstrap, a.topic, a.policy), kafka_partition, settings);
  kf::partition_offset_store store(source);
  sink_t sink(a.pace, layout, sink_options);
  co::pipeline<source_t, sink_t, Policy, co::with_store<kf::partition_offset_store>> p(
      source, sink, store, settings);
  return drive(p, source.end(), a.source, report);
}
}  // namespace detail

/// Consumes the Kafka topic under the policy `a.policy` into the policy's output topic
/// (kafka.hpp's output_topic), each order keyed by its id; the positions in Kafka's committed
/// offsets, of the policy's group: committed before the write (AtMostOnce), after the brokers
/// acknowledged it (AtLeastOnce), or inside the producer's transaction with it
/// (TransactionalPosition). Returns the exit code.
inline int run_kafka_child_kafka(const child_args& a) {
  const reporter report;
  const co::settings settings{.batch_size = a.batch, .auto_commit_interval = a.auto_commit};
  using layout_t = kf::keyed_layout<&order_event::order_id>;
  const layout_t layout(output_topic(a.topic, a.policy));
  const kf::topic_sink_options sink_options{.config = {{"bootstrap.servers", a.bootstrap}}};
  switch (a.policy) {
    case policy_id::at_most_once_auto:
      break;  // R1 refuses it (kafka_sink_refusal): nothing to run
    case policy_id::at_most_once:
      return detail::run_into_topic<co::AtMostOnce<>>(a, layout, sink_options, settings, report);
    case policy_id::at_least_once:
      return detail::run_into_topic<co::AtLeastOnce<>>(a, layout, sink_options, settings, report);
    case policy_id::transactional: {
      using policy_t = co::TransactionalPosition<>;
      using source_t = kf::group_source<order_event, policy_t>;
      using sink_t = paced_topic<kf::transactional_sink<order_event, layout_t, source_t>>;
      source_t source(kafka_member_options(a.bootstrap, a.topic, a.policy));
      // Built before the first poll: its producer's init aborts what a killed predecessor left
      // open, which the claim's offset fetch would otherwise wait for.
      sink_t sink(a.pace, source, layout,
                  kf::producer_options{.config = {{"bootstrap.servers", a.bootstrap}},
                                       .transactional_id = transactional_id(a.topic),
                                       .transaction_timeout = std::chrono::seconds(30),
                                       .request_timeout = std::chrono::seconds(30)});
      co::pipeline<source_t, sink_t, policy_t> p(source, sink, settings);
      return detail::drive_member(p, source, report);
    }
  }
  std::cerr << "crash_lab child: " << display_name(a.policy)
            << " does not write a topic: " << kafka_sink_refusal(a.policy, false) << "\n";
  return 2;
}

/// Consumes the orders under the policy `a.policy`; returns the process exit code.
inline int run_child(const child_args& a) {
  if (a.source == source_kind::kafka) {
    if (a.sink == sink_kind::kafka)
      return run_kafka_child_kafka(a);
    return a.sink == sink_kind::postgres ? run_kafka_child_postgres(a) : run_kafka_child(a);
  }
  return a.sink == sink_kind::postgres ? run_child_postgres(a) : run_file_child(a);
}

/// The child's main: parses `<exe> --child ...` and runs it. Exit codes: 0 consumed to the
/// end, 2 bad command line or an error (printed on stderr), 3 stopped early.
inline int child_main(int argc, char** argv) {
  try {
    if (argc != 13)
      throw std::invalid_argument("expected 11 arguments after --child");
    const auto policy = parse_policy(argv[2]);
    if (!policy)
      throw std::invalid_argument(std::string("unknown policy ") + argv[2]);
    const auto source = parse_source(argv[3]);
    if (!source)
      throw std::invalid_argument(std::string("unknown source ") + argv[3]);
    child_args a;
    a.policy = *policy;
    a.source = *source;
    if (a.source == source_kind::kafka)
      a.bootstrap = argv[4];
    else
      a.log_dir = argv[4];
    a.database = argv[5];
    a.position_file = argv[6];
    a.batch = static_cast<std::size_t>(std::stoull(argv[7]));
    a.pace = std::chrono::microseconds(std::stoll(argv[8]));
    a.auto_commit = std::chrono::milliseconds(std::stoll(argv[9]));
    const auto sink = parse_sink(argv[10]);
    if (!sink)
      throw std::invalid_argument(std::string("unknown sink ") + argv[10]);
    a.sink = *sink;
    a.topic = std::string_view(argv[11]) == "-" ? std::string() : std::string(argv[11]);
    a.conninfo = std::string_view(argv[12]) == "-" ? std::string() : std::string(argv[12]);
    return run_child(a);
  } catch (const std::exception& e) {
    std::cerr << "crash_lab child: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace crash_lab
