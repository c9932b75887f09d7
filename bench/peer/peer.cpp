// SPDX-License-Identifier: BSL-1.0
// commit_order's side of the peer comparison (bench/peer/run): a topic of JSON payments in Kafka
// Connect's envelope ({"schema": ..., "payload": ...}, what JsonConverter reads with
// schemas.enable=true), read into PostgreSQL by commit_order -- the same topic Debezium's JDBC
// sink connector reads in upsert mode into a table of the same shape.
//
//   peer produce --bootstrap B --topic T --partitions P --ids N [--rate R] [--existing 1]
//        creates T (unless it exists), then writes version 1 of payments 1..N and then version 2 of
//        each (2N records, payment i to partition i % P, its key the id), acks=all; at R records a
//        second when R > 0, else as fast as it goes. Each payload carries produced_us, the
//        microsecond it was sent: the latency is measured from it.
//   peer consume --bootstrap B --topic T --group G --conninfo C --policy at_least_once|
//        transactional --ids N [--batch 500] [--hold SECONDS]
//        reads the topic into the table payments_co until every payment is at version 2, then
//        prints one line of JSON: records polled, wall, CPU seconds and peak RSS of this process.
//        at_least_once: postgres::upsert_sink + postgres::position_store (commit after the
//        write); transactional: postgres::guarded_upsert_sink with the positions in its
//        transactions (TransactionalPosition).
//   peer pg-start --info F / peer pg-stop --info F
//        a throwaway PostgreSQL server for the comparison (see pg_start).
#include <libpq-fe.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <commit_order/adapters/json.hpp>
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/kafka.hpp"
#include "support/lab/pg_server.hpp"

namespace {

namespace co = commit_order;
namespace kf = commit_order::kafka;
namespace pg = commit_order::postgres;
namespace cj = commit_order::json;
using namespace std::chrono_literals;

struct payment final {
  std::int64_t id = 0;
  std::int64_t cents = 0;
  std::int64_t version = 0;
  std::int64_t produced_us = 0;
};

using payment_fields =
    cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>,
               cj::field<"version", &payment::version>,
               cj::field<"produced_us", &payment::produced_us>>;
/// The envelope's payload, as Connect's JsonConverter writes it.
using payment_codec = cj::codec<payment, payment_fields, cj::member<"payload">>;

struct payments_co final
    : pg::table_layout<"payments_co", payment, pg::key_columns<pg::column<"id", &payment::id>>,
                       pg::value_columns<pg::column<"cents", &payment::cents>,
                                         pg::column<"version", &payment::version>,
                                         pg::column<"produced_us", &payment::produced_us>>> {};

std::map<std::string, std::string> parse(int argc, char** argv, int from) {
  std::map<std::string, std::string> a;
  for (int i = from; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0)
      throw std::invalid_argument("expected --name value, got " + k);
    a[k.substr(2)] = argv[i + 1];
  }
  return a;
}

std::string need(const std::map<std::string, std::string>& a, const std::string& k) {
  const auto it = a.find(k);
  if (it == a.end())
    throw std::invalid_argument("missing --" + k);
  return it->second;
}

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<std::byte> bytes_of(const std::string& s) {
  const auto* b = reinterpret_cast<const std::byte*>(s.data());
  return {b, b + s.size()};
}

int produce(const std::map<std::string, std::string>& a) {
  const std::string bootstrap = need(a, "bootstrap");
  const std::string topic = need(a, "topic");
  const int partitions = std::stoi(need(a, "partitions"));
  const std::int64_t ids = std::stoll(need(a, "ids"));
  const double rate = a.contains("rate") ? std::stod(a.at("rate")) : 0;
  if (!a.contains("existing"))
    crash_lab::detail::create_topic(bootstrap, topic, partitions);
  kf::producer<std::int64_t> p({{"bootstrap.servers", bootstrap},
                                {"acks", "all"},
                                {"enable.idempotence", "true"},
                                {"linger.ms", "5"}},
                               topic);
  static const std::string schema =
      R"({"type":"struct","optional":false,"name":"payment","fields":[)"
      R"({"field":"id","type":"int64","optional":false},)"
      R"({"field":"cents","type":"int64","optional":false},)"
      R"({"field":"version","type":"int64","optional":false},)"
      R"({"field":"produced_us","type":"int64","optional":false}]})";
  const auto start = std::chrono::steady_clock::now();
  std::int64_t sent = 0;
  for (std::int64_t version = 1; version <= 2; ++version) {
    for (std::int64_t id = 1; id <= ids; ++id) {
      if (rate > 0) {
        const auto due = start + std::chrono::microseconds(static_cast<std::int64_t>(
                                     1e6 * static_cast<double>(sent) / rate));
        std::this_thread::sleep_until(due);
      }
      const std::string value =
          R"({"schema":)" + schema + R"(,"payload":{"id":)" + std::to_string(id) + R"(,"cents":)" +
          std::to_string(id * 100 + version) + R"(,"version":)" + std::to_string(version) +
          R"(,"produced_us":)" + std::to_string(now_us()) + "}}";
      kf::message_copy m;
      m.key = bytes_of(std::to_string(id));
      m.value = bytes_of(value);
      p.send(co::partition_id{static_cast<std::int32_t>(id % partitions)}, m);
      ++sent;
    }
  }
  p.flush(std::chrono::minutes(5));
  std::cout << R"({"produced":)" << sent << "}\n";
  return 0;
}

/// True once every payment 1..ids is at version 2 in `table`.
class done_check final {
 public:
  done_check(const std::string& conninfo, const std::string& table, std::int64_t ids)
      : c_(PQconnectdb(conninfo.c_str()), &PQfinish)
      , sql_("SELECT count(*) FROM " + table + " WHERE version = 2")
      , ids_(ids) {
    if (PQstatus(c_.get()) != CONNECTION_OK)
      throw std::runtime_error(PQerrorMessage(c_.get()));
  }
  bool operator()() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_)
      return false;
    next_ = now + 100ms;
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(c_.get(), sql_.c_str()), &PQclear);
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK)
      return false;  // the table is not there yet
    return std::stoll(PQgetvalue(r.get(), 0, 0)) == ids_;
  }

 private:
  std::unique_ptr<PGconn, decltype(&PQfinish)> c_;
  std::string sql_;
  std::int64_t ids_;
  std::chrono::steady_clock::time_point next_{};
};

template <class Pipeline>
void run_until_done(Pipeline& p, done_check& done, std::int64_t& polled) {
  while (!done())
    polled += static_cast<std::int64_t>(p.poll_once());
}

int consume(const std::map<std::string, std::string>& a) {
  const std::string conninfo = need(a, "conninfo");
  const std::string table = "payments_co";
  const std::string policy = need(a, "policy");
  const std::int64_t ids = std::stoll(need(a, "ids"));
  kf::consumer_options o{.topic = need(a, "topic"),
                         .config = {{"bootstrap.servers", need(a, "bootstrap")},
                                    {"group.id", need(a, "group")},
                                    {"fetch.wait.max.ms", "10"}}};
  const co::settings s{.batch_size = a.contains("batch") ? std::stoul(a.at("batch")) : 500};
  done_check done(conninfo, table, ids);
  std::int64_t polled = 0;
  const auto start = std::chrono::steady_clock::now();
  pg::sink_options so;
  so.stream = table;
  using layout = payments_co;
  if (policy == "transactional") {
    using policy_t = co::TransactionalPosition<>;
    using source_t = kf::group_source<payment, policy_t, payment_codec>;
    using sink_t = pg::guarded_upsert_sink<layout, pg::synced>;
    source_t src(o, s);
    sink_t sink(conninfo, so);
    co::pipeline<source_t, sink_t, policy_t> p(src, sink, s);
    run_until_done(p, done, polled);
    src.close();
  } else if (policy == "at_least_once") {
    using policy_t = co::AtLeastOnce<>;
    using source_t = kf::group_source<payment, policy_t, payment_codec>;
    using sink_t = pg::upsert_sink<layout, pg::synced>;
    using store_t = pg::position_store<pg::synced>;
    source_t src(o, s);
    sink_t sink(conninfo, so);
    pg::store_options st;
    st.stream = table;
    store_t store(conninfo, st);
    co::pipeline<source_t, sink_t, policy_t, co::with_store<store_t>> p(src, sink, store, s);
    run_until_done(p, done, polled);
    src.close();
  } else {
    throw std::invalid_argument("--policy must be at_least_once or transactional");
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                     static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  std::cout << R"({"polled":)" << polled << R"(,"wall_s":)" << wall << R"(,"cpu_s":)" << cpu
            << R"(,"max_rss_kb":)" << u.ru_maxrss << "}" << std::endl;
  // --hold: stay (idle) until ended, so that whoever measures this process from outside can
  // read it at the moment it sees the table complete, as it reads the peer's.
  if (a.contains("hold"))
    std::this_thread::sleep_for(std::chrono::seconds(std::stoi(a.at("hold"))));
  return 0;
}

/// Starts a throwaway PostgreSQL server (fsync on, listening on 127.0.0.1:5432 too, for the JDBC
/// driver, and with track_commit_timestamp on, which the latency is read from) and leaves it
/// running; --info gets its directory and libpq connection string, one a line.
int pg_start(const std::map<std::string, std::string>& a) {
  crash_lab::pg_server server(crash_lab::pg_server_options{
      .fsync = true,
      .extra_settings = "-c listen_addresses=127.0.0.1 -c track_commit_timestamp=on "
                        "-c shared_buffers=128MB -c max_wal_size=2GB"});
  std::ofstream(need(a, "info")) << server.dir().string() << "\n" << server.conninfo() << "\n";
  server.release();
  return 0;
}

/// Stops the server pg-start started and removes its directory.
int pg_stop(const std::map<std::string, std::string>& a) {
  std::ifstream in(need(a, "info"));
  std::string dir;
  if (!std::getline(in, dir) || dir.empty())
    throw std::runtime_error("no server directory in " + need(a, "info"));
  (void)crash_lab::pg_server::adopt(dir);  // its destructor stops it and removes the directory
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2)
      throw std::invalid_argument("usage: peer produce|consume --name value ...");
    const std::string mode = argv[1];
    const auto a = parse(argc, argv, 2);
    if (mode == "produce")
      return produce(a);
    if (mode == "consume")
      return consume(a);
    if (mode == "pg-start")
      return pg_start(a);
    if (mode == "pg-stop")
      return pg_stop(a);
    throw std::invalid_argument("unknown mode " + mode);
  } catch (const std::exception& e) {
    std::cerr << "peer: " << e.what() << "\n";
    return 1;
  }
}
