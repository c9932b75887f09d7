// crash_lab/lab/child.hpp — the consumer process the supervisor starts and kills.
//
//   <exe> --child <policy> <log dir> <database> <position file> <batch> <pace µs> <interval ms>
//         <sink: sqlite|postgres> <PostgreSQL connection string, or ->
//
// It recovers, consumes the log to its end through the policy's pipeline, and exits 0. It
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

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include <commit_order/commit_order.hpp>

#include "lab/orders.hpp"
#include "lab/pg_lab.hpp"
#include "lab/policies.hpp"

namespace crash_lab {

/// What the child is told on its command line.
struct child_args {
  policy_id policy = policy_id::transactional;
  std::filesystem::path log_dir;
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
          a.log_dir.string(),
          a.database.string(),
          a.position_file.string(),
          std::to_string(a.batch),
          std::to_string(a.pace.count()),
          std::to_string(a.auto_commit.count()),
          std::string(flag_name(a.sink)),
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
/// the capabilities the rules read, the key, the transactions — is the real sink's.
template <class Sink>
class paced final : public Sink {
 public:
  template <class... Args>
  paced(std::chrono::microseconds pace, const reporter& report, Args&&... args)
      : Sink(std::forward<Args>(args)...), pace_(pace), report_(&report) {}

  co::write_outcome apply(co::offset source_offset, const order_event& row) {
    if (pace_.count() > 0)
      std::this_thread::sleep_for(pace_);
    const co::write_outcome outcome = Sink::apply(source_offset, row);
    if (outcome == co::write_outcome::absorbed)
      report_->line("absorbed");
    return outcome;
  }

 private:
  std::chrono::microseconds pace_;
  const reporter* report_;
};

namespace detail {

inline sq::sink_options lab_sink_options() {
  return sq::sink_options{.stream = std::string(stream_name)};
}

template <class Pipeline>
int drive(Pipeline& pipeline, const order_log& log, const reporter& report) {
  report.line("ready", pipeline.recover().value());
  while (pipeline.poll_once() != 0)
    report.line("at", pipeline.read_position().value());
  if (pipeline.read_position() != log.end()) {
    std::cerr << "crash_lab child: stopped at " << pipeline.read_position()
              << " before the end of the log " << log.end() << "\n";
    return 3;
  }
  report.line("done", pipeline.read_position().value());
  return 0;
}

}  // namespace detail

/// Consumes the log under the policy `a.policy` into SQLite; returns the process exit code.
inline int run_child_sqlite(const child_args& a) {
  const reporter report;
  order_log log(a.log_dir, lab_log_options());
  const co::settings settings{.batch_size = a.batch, .auto_commit_interval = a.auto_commit};
  switch (a.policy) {
    case policy_id::at_most_once_auto: {
      using sink_t = paced<sq::upsert_sink<orders_flat>>;
      using store_t = sq::position_store<>;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      store_t store(a.database, sq::store_options{.stream = std::string(stream_name)});
      co::pipeline<order_log, sink_t, co::AtMostOnce<co::AutoCommit>, co::with_store<store_t>> p(
          log, sink, store, settings);
      return detail::drive(p, log, report);
    }
    case policy_id::at_most_once: {
      using sink_t = paced<sq::append_sink<orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtMostOnce<>, co::with_store<store_t>> p(log, sink, store,
                                                                                   settings);
      return detail::drive(p, log, report);
    }
    case policy_id::at_least_once: {
      using sink_t = paced<sq::guarded_upsert_sink<orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<store_t>> p(
          log, sink, store, settings);
      return detail::drive(p, log, report);
    }
    case policy_id::transactional: {
      using sink_t = paced<sq::guarded_upsert_sink<orders_flat>>;
      sink_t sink(a.pace, report, a.database, detail::lab_sink_options());
      co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink, settings);
      return detail::drive(p, log, report);
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
      return detail::drive(p, log, report);
    }
    case policy_id::at_most_once: {
      using sink_t = pg_paced<pgl::append_sink<pg_orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.conninfo, options);
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtMostOnce<>, co::with_store<store_t>> p(log, sink, store,
                                                                                   settings);
      return detail::drive(p, log, report);
    }
    case policy_id::at_least_once: {
      using sink_t = pg_paced<pgl::guarded_upsert_sink<pg_orders_flat>>;
      using store_t = co::file::position_store;
      sink_t sink(a.pace, report, a.conninfo, options);
      store_t store(a.position_file);
      co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<store_t>> p(
          log, sink, store, settings);
      return detail::drive(p, log, report);
    }
    case policy_id::transactional: {
      using sink_t = pg_paced<pgl::guarded_upsert_sink<pg_orders_flat>>;
      sink_t sink(a.pace, report, a.conninfo, options);
      co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink, settings);
      return detail::drive(p, log, report);
    }
  }
  return 2;
}

/// Consumes the log under the policy `a.policy`; returns the process exit code.
inline int run_child(const child_args& a) {
  return a.sink == sink_kind::postgres ? run_child_postgres(a) : run_child_sqlite(a);
}

/// The child's main: parses `<exe> --child ...` and runs it. Exit codes: 0 consumed to the
/// end, 2 bad command line or an error (printed on stderr), 3 stopped early.
inline int child_main(int argc, char** argv) {
  try {
    if (argc != 11)
      throw std::invalid_argument("expected 9 arguments after --child");
    const auto policy = parse_policy(argv[2]);
    if (!policy)
      throw std::invalid_argument(std::string("unknown policy ") + argv[2]);
    child_args a;
    a.policy = *policy;
    a.log_dir = argv[3];
    a.database = argv[4];
    a.position_file = argv[5];
    a.batch = static_cast<std::size_t>(std::stoull(argv[6]));
    a.pace = std::chrono::microseconds(std::stoll(argv[7]));
    a.auto_commit = std::chrono::milliseconds(std::stoll(argv[8]));
    const auto sink = parse_sink(argv[9]);
    if (!sink)
      throw std::invalid_argument(std::string("unknown sink ") + argv[9]);
    a.sink = *sink;
    a.conninfo = std::string_view(argv[10]) == "-" ? std::string() : std::string(argv[10]);
    return run_child(a);
  } catch (const std::exception& e) {
    std::cerr << "crash_lab child: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace crash_lab
