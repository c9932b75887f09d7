// SPDX-License-Identifier: BSL-1.0
// crash_lab — kills real consumer processes and shows what each commit order lost or
// duplicated.
//
//   crash_lab [--source file|kafka] [--bootstrap HOST:PORT] [--sink sqlite|postgres|kafka]
//             [--pg CONNINFO] [--records N] [--kills K] [--seed S] [--batch B] [--pace-us U]
//             [--keep DIR]
//
// Writes N order events to a file log (or, with --source kafka, to a topic of librdkafka's mock
// cluster, which this process hosts, or to a new topic on the broker --bootstrap names), then
// for each of AtMostOnce<AutoCommit>, AtMostOnce, AtLeastOnce and TransactionalPosition starts
// a consumer (this program with --child) on a fresh SQLite database -- or, with --sink postgres, a
// fresh schema of a PostgreSQL database: the one --pg names, else a throwaway server of its own
// (fsync=on) -- SIGKILLs it K times at random moments, restarts it until the log is consumed, and
// reconciles the table against the log. With --source kafka --sink kafka each policy writes a
// topic of its own instead (kafka::topic_sink, or kafka::transactional_sink under
// TransactionalPosition, which needs a real broker), and the lab reads it back as a
// read_committed reader would: what each policy lost or duplicated downstream. Exit code 0 only
// if every policy kept its guarantee.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/lab/child.hpp"
#include "support/lab/pg_server.hpp"
#include "support/lab/report.hpp"
#include "support/lab/supervisor.hpp"

namespace {

void usage(std::ostream& os) {
  os << "usage: crash_lab [--source file|kafka] [--bootstrap HOST:PORT]"
        " [--sink sqlite|postgres|kafka]"
        " [--pg CONNINFO] [--records N] [--kills K] [--seed S] [--batch B] [--pace-us U]"
        " [--keep DIR]\n"
        "  --source S   where the orders are: a file log (default) or a Kafka topic (a mock\n"
        "               cluster in this process; positions in Kafka's committed offsets for\n"
        "               AtMostOnce and AtMostOnce<AutoCommit>, librdkafka's own auto-commit)\n"
        "  --bootstrap B  with --source kafka: a new topic on the broker at B instead of the\n"
        "               mock cluster\n"
        "  --records N  order events in the log (default 2000)\n"
        "  --kills K    SIGKILLs per policy (default 10)\n"
        "  --seed S     seeds the events and the kill times (default 1)\n"
        "  --batch B    records per poll: the unit of work (default 8)\n"
        "  --pace-us U  pause before each write, standing for per-record work (default 250)\n"
        "  --keep DIR   work in DIR and keep the log and databases for inspection\n"
        "  --sink S     sqlite (default), postgres, or kafka: with --source kafka, a topic per\n"
        "               policy on the same cluster, read back read_committed\n"
        "  --pg C       the PostgreSQL database (a libpq connection string; its server must run\n"
        "               with fsync=on); default: a throwaway server started for the run\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (crash_lab::is_child_invocation(argc, argv))
    return crash_lab::child_main(argc, argv);

  crash_lab::lab_config config;
  std::optional<std::filesystem::path> keep;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view flag = argv[i];
      if (flag == "--help" || flag == "-h") {
        usage(std::cout);
        return 0;
      }
      if (i + 1 >= argc)
        throw std::invalid_argument("missing value after " + std::string(flag));
      const std::string value = argv[++i];
      if (flag == "--source") {
        const auto source = crash_lab::parse_source(value);
        if (!source)
          throw std::invalid_argument("--source is file or kafka, not " + value);
        config.source = *source;
      } else if (flag == "--records")
        config.records = std::stoll(value);
      else if (flag == "--kills")
        config.kills = std::stoi(value);
      else if (flag == "--seed")
        config.seed = std::stoull(value);
      else if (flag == "--batch")
        config.batch = std::stoull(value);
      else if (flag == "--pace-us")
        config.pace = std::chrono::microseconds(std::stoll(value));
      else if (flag == "--keep")
        keep = value;
      else if (flag == "--sink") {
        const auto sink = crash_lab::parse_sink(value);
        if (!sink)
          throw std::invalid_argument("--sink takes sqlite, postgres or kafka, not " + value);
        config.sink = *sink;
      } else if (flag == "--pg")
        config.pg_conninfo = value;
      else if (flag == "--bootstrap")
        config.kafka_bootstrap = value;
      else
        throw std::invalid_argument("unknown option " + std::string(flag));
    }
    if (!config.kafka_bootstrap.empty() && config.source != crash_lab::source_kind::kafka)
      throw std::invalid_argument("--bootstrap names a Kafka broker: it goes with --source kafka");
    if (config.sink == crash_lab::sink_kind::kafka &&
        config.source != crash_lab::source_kind::kafka)
      throw std::invalid_argument(
          "--sink kafka writes to the cluster the orders are read from: it goes with --source "
          "kafka");
    if (config.records < 1 || config.kills < 0 || config.batch < 1 || config.pace.count() < 0)
      throw std::invalid_argument(
          "--records and --batch must be positive, --kills and "
          "--pace-us not negative");
  } catch (const std::exception& e) {
    std::cerr << "crash_lab: " << e.what() << "\n";
    usage(std::cerr);
    return 2;
  }
  config.orders = std::max<std::int64_t>(1, config.records / 10);
  config.executable = std::filesystem::read_symlink("/proc/self/exe");
  if (keep) {
    config.work_dir = *keep;
  } else {
    std::string pattern = (std::filesystem::temp_directory_path() / "crash_lab.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "crash_lab: cannot create a work directory\n";
      return 2;
    }
    config.work_dir = pattern;
  }
  config.progress = [](const std::string& line) { std::cout << line << std::endl; };
  std::optional<crash_lab::pg_server> server;
  if (config.sink == crash_lab::sink_kind::postgres && config.pg_conninfo.empty()) {
    try {
      server.emplace(crash_lab::pg_server_options{.fsync = true});
    } catch (const std::exception& e) {
      std::cerr << "crash_lab: cannot start a PostgreSQL server: " << e.what() << "\n";
      return 2;
    }
    config.pg_conninfo = server->conninfo();
  }

  std::cout << "crash_lab: " << config.records << " order events over " << config.orders
            << " orders in a "
            << (config.source == crash_lab::source_kind::kafka ? "Kafka topic" : "file log") << ", "
            << config.kills << " kills per policy, batch " << config.batch << ", seed "
            << config.seed << ", in " << config.work_dir.string() << ", into "
            << (config.sink == crash_lab::sink_kind::postgres
                    ? "PostgreSQL (" + config.pg_conninfo + ")"
                : config.sink == crash_lab::sink_kind::kafka ? std::string("a topic per policy")
                                                             : std::string("SQLite"))
            << "\n";
  std::vector<crash_lab::policy_id> policies;
  for (const crash_lab::policy_id p : crash_lab::all_policies) {
    const std::string_view refused =
        config.sink == crash_lab::sink_kind::kafka
            ? crash_lab::kafka_sink_refusal(p, config.kafka_bootstrap.empty())
            : std::string_view{};
    if (refused.empty())
      policies.push_back(p);
    else
      std::cout << crash_lab::display_name(p) << " into a topic is not run: " << refused << "\n";
  }
  int status = 0;
  try {
    const auto outcomes = crash_lab::run_lab(config, policies);
    std::cout << "\n";
    crash_lab::print_table(std::cout, outcomes);
    std::cout << "\n" << crash_lab::reading(outcomes, config.batch) << "\n\n";
    for (const auto& o : outcomes) {
      const auto broken = crash_lab::violations(o, config.batch);
      std::cout << crash_lab::display_name(o.policy) << ": "
                << (broken.empty() ? "guarantee held" : "GUARANTEE BROKEN:");
      for (const auto& b : broken)
        std::cout << " " << b << ";";
      std::cout << "\n";
      if (!broken.empty())
        status = 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "crash_lab: " << e.what() << "\n";
    status = 2;
  }
  if (!keep)
    std::filesystem::remove_all(config.work_dir);
  return status;
}
