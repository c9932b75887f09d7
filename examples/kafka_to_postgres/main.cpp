// SPDX-License-Identifier: BSL-1.0
// kafka_to_postgres — the configuration this library is for, as a team would start it: the
// members of a consumer group read a Kafka topic of order events into one PostgreSQL ledger
// table, each row and each partition's position in one transaction (TransactionalPosition),
// and a member that lost its partitions is fenced by the epoch stored beside the position.
//
//   kafka_to_postgres --bootstrap HOST:PORT [--pg CONNINFO] [--events N] [--kills K] [--seed S]
//                     [--restart-broker COMMAND]
//   kafka_to_postgres --member BOOTSTRAP TOPIC GROUP CONNINFO        (one member; runs until
//                                                                    killed)
//
// It creates a topic of 4 partitions on the broker, starts three member processes of one
// group, and produces the events in waves; between waves it SIGKILLs a member at random (in the
// middle of its work) and starts another, and once it stops the PostgreSQL server with
// `pg_ctl stop -m immediate` and starts it again (its own throwaway server, fsync=on, unless
// --pg names one; then the server is left alone). With --restart-broker, a third of the way in
// it runs COMMAND, which must kill the broker and start it again (the tests: SIGKILL, then a
// start from its data), while members and the producer keep going. Then it waits until the ledger
// holds every order at its latest event and every partition's stored position is the partition's
// end, and prints the reconciliation. Exit code 0 only if every order is there once, at its latest
// event, and every position is exactly what was applied.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <commit_order/adapters/kafka.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/kafka.hpp"
#include "support/lab/pg_lab.hpp"
#include "support/lab/pg_server.hpp"
#include "support/lab/process.hpp"

namespace {

namespace co = commit_order;
namespace kf = commit_order::kafka;
namespace pg = commit_order::postgres;
using namespace std::chrono_literals;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  std::int64_t event_seq = 0;  ///< rises with every event of an order
};

/// The ledger: one row per order, its latest event, and the partition and offset it came from.
struct ledger final
    : pg::table_layout<"orders_flat", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"customer_id", &order_event::customer_id>,
                                         pg::column<"total_cents", &order_event::total_cents>,
                                         pg::column<"event_seq", &order_event::event_seq>>> {};

using policy = co::TransactionalPosition<>;
using source_t = kf::group_source<order_event, policy>;
using sink_t = pg::guarded_upsert_sink<ledger>;  // partition-scoped offset guard, fencing
using pipeline_t = co::pipeline<source_t, sink_t, policy>;

constexpr int partitions = 4;
constexpr int members = 3;
const std::string schema = "kafka_to_postgres";
const std::string stream = "ledger";

pg::sink_options sink_options() {
  pg::sink_options o;
  o.schema = schema;
  o.stream = stream;
  return o;
}

// ---- a member ----------------------------------------------------------------------------

/// Reads the topic into the ledger until killed. The world's failures (the server restarting,
/// the group rebalancing) are waited out: the next poll recovers from the stored positions.
int member(const std::string& bootstrap, const std::string& topic, const std::string& group,
           const std::string& conninfo) {
  kf::consumer_options o{.topic = topic,
                         .config = {{"bootstrap.servers", bootstrap},
                                    {"group.id", group},
                                    {"session.timeout.ms", "6000"},
                                    {"heartbeat.interval.ms", "500"},
                                    {"fetch.wait.max.ms", "10"}}};
  source_t source(o);
  // Started while the server is down, it waits for it; once connected, the sink reconnects by
  // itself after the server restarted, and the pipeline recovers from the stored positions at
  // the poll after any failure.
  std::optional<sink_t> sink;
  while (!sink) {
    try {
      sink.emplace(conninfo, sink_options());
    } catch (const co::infrastructure_error& e) {
      std::cerr << "member " << ::getpid() << ": " << e.what() << " -- again\n";
      std::this_thread::sleep_for(200ms);
    }
  }
  pipeline_t pipeline(source, *sink, co::settings{.batch_size = 64});
  for (;;) {
    try {
      (void)pipeline.poll_once();
    } catch (const co::infrastructure_error& e) {
      std::cerr << "member " << ::getpid() << ": " << e.what() << " -- again\n";
      std::this_thread::sleep_for(200ms);
    } catch (const co::fenced& e) {
      // Its partitions were taken over while it worked: the unit rolled back; it goes on
      // with what the group gives it now.
      std::cerr << "member " << ::getpid() << ": " << e.what() << "\n";
    }
  }
}

// ---- the supervisor ------------------------------------------------------------------------

struct options final {
  std::string bootstrap;
  std::string pg;
  std::int64_t events = 20000;
  int kills = 6;
  std::uint64_t seed = 1;
  std::string restart_broker;  ///< a shell command that kills the broker and starts it again
};

/// What was produced: each order's latest event, and each partition's end.
struct produced final {
  std::map<std::int64_t, order_event> latest;
  std::map<std::int64_t, std::int64_t> partition_of;
  std::vector<std::int64_t> ends = std::vector<std::int64_t>(partitions, 0);
};

void produce_wave(kf::producer<order_event>& out, produced& p, std::mt19937_64& rng,
                  std::int64_t count, std::int64_t orders) {
  for (std::int64_t i = 0; i < count; ++i) {
    const auto id = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(orders));
    order_event e{id, 1000 + id, 0, 0};
    if (const auto it = p.latest.find(id); it != p.latest.end())
      e.event_seq = it->second.event_seq + 1;
    e.total_cents = 100 * e.event_seq + id;
    const auto k = static_cast<std::int32_t>(id % partitions);
    out.send(co::partition_id{k}, e);
    p.latest[id] = e;
    p.partition_of[id] = k;
    ++p.ends[static_cast<std::size_t>(k)];
  }
  out.flush();
}

/// The ledger as it is now, against what was produced.
struct reconciliation final {
  std::int64_t orders = 0;
  std::int64_t rows = 0;
  std::int64_t missing = 0;  ///< orders with no row
  std::int64_t stale = 0;    ///< rows at an older event than the latest
  std::int64_t foreign = 0;  ///< rows of orders never produced, or in another partition
  std::vector<std::int64_t> positions = std::vector<std::int64_t>(partitions, -1);
  [[nodiscard]] bool holds(const produced& p) const {
    return missing == 0 && stale == 0 && foreign == 0 && rows == orders && positions == p.ends;
  }
};

reconciliation reconcile(const std::string& conninfo, const produced& p) {
  crash_lab::pg_client c(conninfo);
  reconciliation r;
  r.orders = static_cast<std::int64_t>(p.latest.size());
  const auto rows =
      c.exec("SELECT order_id, event_seq, source_partition FROM " + schema + ".orders_flat");
  std::map<std::int64_t, bool> seen;
  for (int i = 0; i < rows.rows(); ++i) {
    ++r.rows;
    const std::int64_t id = rows.integer(i, 0);
    const auto it = p.latest.find(id);
    if (it == p.latest.end() || p.partition_of.at(id) != rows.integer(i, 2)) {
      ++r.foreign;
      continue;
    }
    seen[id] = true;
    if (rows.integer(i, 1) != it->second.event_seq)
      ++r.stale;
  }
  for (const auto& [id, e] : p.latest)
    if (!seen.contains(id))
      ++r.missing;
  const auto positions =
      c.exec("SELECT \"partition\", position FROM " + schema +
             ".commit_order_positions WHERE stream = '" + stream + "' AND position IS NOT NULL");
  for (int i = 0; i < positions.rows(); ++i) {
    const std::int64_t k = positions.integer(i, 0);
    if (k >= 0 && k < partitions)
      r.positions[static_cast<std::size_t>(k)] = positions.integer(i, 1);
  }
  return r;
}

int supervise(const options& o) {
  std::optional<crash_lab::pg_server> server;
  std::string conninfo = o.pg;
  if (conninfo.empty()) {
    server.emplace(crash_lab::pg_server_options{.fsync = true});
    conninfo = server->conninfo();
  }
  const std::string topic =
      "kafka_to_postgres." + std::to_string(::getpid()) + "." +
      std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  const std::string group = topic + ".ledger";
  crash_lab::detail::create_topic(o.bootstrap, topic, partitions);
  {
    // The tables exist before the members start (each would create them if missing).
    crash_lab::pg_client c(conninfo);
    c.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    const sink_t creator(conninfo, sink_options());
  }
  std::printf(
      "kafka_to_postgres: %lld events into %s (%d partitions), %d members of group %s, "
      "into PostgreSQL (%s)\n",
      static_cast<long long>(o.events), topic.c_str(), partitions, members, group.c_str(),
      conninfo.c_str());

  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::vector<std::string> args{"--member", o.bootstrap, topic, group, conninfo};
  std::vector<std::unique_ptr<crash_lab::child_process>> running;
  for (int i = 0; i < members; ++i)
    running.push_back(std::make_unique<crash_lab::child_process>(self, args));

  std::mt19937_64 rng(o.seed);
  kf::producer<order_event> out(
      {{"bootstrap.servers", o.bootstrap}, {"enable.idempotence", "true"}}, topic);
  produced p;
  const int waves = o.kills + 2;
  const std::int64_t per_wave = o.events / waves;
  const std::int64_t orders = std::max<std::int64_t>(1, o.events / 10);
  int kills = 0;
  int member_failures = 0;  // members that exited by themselves: none may
  const auto stop = [&](crash_lab::child_process& m) {
    if (!m.kill([](std::string_view) {}).killed)
      ++member_failures;
  };
  bool server_crashed = false;
  bool broker_restarted = false;
  for (int w = 0; w < waves; ++w) {
    if (!o.restart_broker.empty() && !broker_restarted && w == waves / 3) {
      std::printf("  wave %d: the broker killed and started again (%s)\n", w + 1,
                  o.restart_broker.c_str());
      std::fflush(stdout);
      if (std::system(o.restart_broker.c_str()) != 0)
        throw std::runtime_error("--restart-broker failed: " + o.restart_broker);
      broker_restarted = true;
    }
    produce_wave(out, p, rng, w + 1 == waves ? o.events - per_wave * w : per_wave, orders);
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 400));
    if (kills < o.kills) {
      const std::size_t victim = rng() % running.size();
      stop(*running[victim]);
      running[victim] = std::make_unique<crash_lab::child_process>(self, args);
      ++kills;
      std::printf("  wave %d: member %zu SIGKILLed and started again\n", w + 1, victim + 1);
    }
    if (server && !server_crashed && w == waves / 2) {
      server->crash();
      std::printf("  wave %d: PostgreSQL stopped with pg_ctl stop -m immediate\n", w + 1);
      std::this_thread::sleep_for(500ms);
      server->restart();
      server_crashed = true;
      std::printf("  wave %d: PostgreSQL started again\n", w + 1);
    }
  }

  reconciliation r;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  for (;;) {
    try {
      r = reconcile(conninfo, p);
    } catch (const std::exception&) {
      r = reconciliation{};
    }
    if (r.holds(p) || std::chrono::steady_clock::now() > deadline)
      break;
    std::this_thread::sleep_for(250ms);
  }
  for (auto& m : running)
    stop(*m);

  std::printf(
      "reconciled: %lld orders, %lld rows; %lld missing, %lld at an older event, %lld "
      "foreign\n",
      static_cast<long long>(r.orders), static_cast<long long>(r.rows),
      static_cast<long long>(r.missing), static_cast<long long>(r.stale),
      static_cast<long long>(r.foreign));
  for (int k = 0; k < partitions; ++k)
    std::printf("  partition %d: position %lld, end %lld\n", k,
                static_cast<long long>(r.positions[static_cast<std::size_t>(k)]),
                static_cast<long long>(p.ends[static_cast<std::size_t>(k)]));
  std::printf("%d members SIGKILLed, %d exited by themselves, PostgreSQL %s, the broker %s\n",
              kills, member_failures,
              server_crashed ? "stopped immediately and restarted once" : "left alone (--pg)",
              broker_restarted ? "killed and restarted once" : "left alone");
  if (!r.holds(p) || member_failures != 0) {
    std::printf("FAILED: %s\n", member_failures != 0 ? "a member stopped on an error (its stderr "
                                                       "says which)"
                                                     : "the ledger does not match the topic");
    return 1;
  }
  std::printf("every order once, at its latest event; every position is what was applied\n");
  return 0;
}

void usage(std::ostream& os) {
  os << "usage: kafka_to_postgres --bootstrap HOST:PORT [--pg CONNINFO] [--events N] "
        "[--kills K] [--seed S] [--restart-broker COMMAND]\n";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 6 && std::string_view(argv[1]) == "--member")
      return member(argv[2], argv[3], argv[4], argv[5]);
  } catch (const std::exception& e) {
    std::cerr << "kafka_to_postgres member " << ::getpid() << ": " << e.what() << "\n";
    return 3;
  }
  options o;
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
      if (flag == "--bootstrap")
        o.bootstrap = value;
      else if (flag == "--pg")
        o.pg = value;
      else if (flag == "--events")
        o.events = std::stoll(value);
      else if (flag == "--kills")
        o.kills = std::stoi(value);
      else if (flag == "--restart-broker")
        o.restart_broker = value;
      else if (flag == "--seed")
        o.seed = std::stoull(value);
      else
        throw std::invalid_argument("unknown option " + std::string(flag));
    }
    if (o.bootstrap.empty())
      throw std::invalid_argument("--bootstrap names the Kafka broker");
    if (o.events < 1 || o.kills < 0)
      throw std::invalid_argument("--events must be positive, --kills not negative");
  } catch (const std::exception& e) {
    std::cerr << "kafka_to_postgres: " << e.what() << "\n";
    usage(std::cerr);
    return 2;
  }
  try {
    return supervise(o);
  } catch (const std::exception& e) {
    std::cerr << "kafka_to_postgres: " << e.what() << "\n";
    return 1;
  }
}
