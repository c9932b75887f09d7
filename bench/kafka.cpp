// SPDX-License-Identifier: BSL-1.0
// Consuming a Kafka topic (librdkafka's mock cluster, in this process) through `pipeline`,
// against a hand-written librdkafka loop doing the same steps, at batch 512:
//
//   <variant>/kafka/at_least_once/memory   AtLeastOnce: the rows in a transaction of the
//                                          in-memory table, then a synchronous commit of the
//                                          position to Kafka's offsets
//   <variant>/kafka/transactional/memory   TransactionalPosition: rows and position in one
//                                          transaction of the in-memory table
//   <variant>/kafka/transactional/sqlite   TransactionalPosition into SQLite (wal_full)
//
// (AtLeastOnce into SQLite with Kafka's offsets as the store is not a case: rule R9a refuses
// it -- Kafka's replicated offsets would vouch for rows one machine's SQLite file can lose.)
//
// Each iteration consumes the topic (4 partitions of 40000 records; the single-partition SQLite
// sink reads partition 0) from offset 0 with a new consumer and a new sink; creating them is not
// timed, everything from the first poll on is: the start-up checks (claims, watermarks, committed
// offsets), the polls, the writes, the commits. The hand-written loop builds its batches with
// rd_kafka_consumer_poll as the source does, applies the same rows to the same sink, and commits as
// the policy does.
//
//   kafka_bench [--rounds R] [benchmark flags]   run the benchmarks, then the interleaved
//                                                comparison (R rounds, default 15) the ratio
//                                                is read from
//   kafka_bench [--rounds R] --compare           only the interleaved comparison
//   kafka_bench --verify                         check each pipeline and its twin leave the
//                                                same state
//
// With COMMIT_ORDER_KAFKA_BOOTSTRAP=<host:port> set, the topic is a new one on that broker (a
// real one: the kafka_broker fixture's, or tools/kafka-broker's jars started by hand), written
// with acks=all, instead of the mock cluster in this process.
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <commit_order/adapters/kafka.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/kafka.hpp"

namespace {

namespace co = commit_order;
namespace kf = commit_order::kafka;
namespace sq = commit_order::sqlite;

struct order final {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  std::int64_t event_seq = 0;
  friend bool operator==(const order&, const order&) = default;
};

struct orders_flat final
    : sq::table_layout<"orders_flat", order,
                       sq::key_columns<sq::column<"order_id", &order::order_id>>,
                       sq::value_columns<sq::column<"customer_id", &order::customer_id>,
                                         sq::column<"total_cents", &order::total_cents>,
                                         sq::column<"event_seq", &order::event_seq>>> {};

constexpr int partition_count = 4;
constexpr std::int64_t per_partition = 40000;  // 1.8 MB: well inside the mock's 5 MiB
constexpr std::int64_t orders_per_partition = 1250;
constexpr std::size_t batch = 512;

std::vector<co::partition_id> all_partitions() {
  std::vector<co::partition_id> ks;
  for (int k = 0; k < partition_count; ++k)
    ks.push_back(co::partition_id{k});
  return ks;
}

// Kafka's offsets are Replicated: rule R9a wants a sink at least as durable under AtLeastOnce
// (declared: the in-memory table simulates no durability).
template <class Durability>
using table_t =
    co::memory::table<order, co::key<&order::order_id>,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped,
                                       co::Transactional, Durability>>;
using replicated_table = table_t<co::Replicated>;
using volatile_table = table_t<co::Volatile>;
using sqlite_sink = sq::guarded_upsert_sink<orders_flat>;

/// The topic, produced once: per_partition order updates in each of its partitions, every
/// order in one partition.
struct topic final {
  std::optional<kf::mock_cluster> cluster;
  std::string name = "orders";
  kf::properties consumer_config;
  topic() {
    kf::properties producer_config;
    if (const char* b = std::getenv("COMMIT_ORDER_KAFKA_BOOTSTRAP"); b != nullptr && *b != '\0') {
      name = "bench.orders." + std::to_string(::getpid()) + "." +
             std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
      crash_lab::detail::create_topic(b, name, partition_count);
      producer_config = {{"bootstrap.servers", b}, {"acks", "all"}, {"linger.ms", "5"}};
      consumer_config = {{"bootstrap.servers", b}, {"fetch.wait.max.ms", "10"}};
    } else {
      cluster.emplace();
      cluster->create_topic(name, partition_count);
      producer_config = cluster->client_config();
      consumer_config = cluster->consumer_config();
    }
    kf::producer<order> p(producer_config, name);
    for (std::int64_t j = 0; j < per_partition; ++j) {
      for (int k = 0; k < partition_count; ++k) {
        const std::int64_t id = k * orders_per_partition + 1 + (j * 7919) % orders_per_partition;
        p.send(co::partition_id{k},
               order{id, 100 + id % 53, 100 + (j * 31) % 50000, 1 + j / orders_per_partition});
      }
    }
    p.flush();
  }
};

topic& shared_topic() {
  static topic t;
  return t;
}

/// A consumer group nobody used before: its committed offsets start empty.
std::string fresh_group() {
  static int n = 0;
  return "bench." + std::to_string(n++);
}

kf::consumer_options options(const std::string& group) {
  kf::consumer_options o{.topic = shared_topic().name, .config = shared_topic().consumer_config};
  o.config["group.id"] = group;
  return o;
}

std::filesystem::path database() {
  return std::filesystem::temp_directory_path() / "commit_order_kafka_bench.sqlite";
}
void remove_database() {
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(database().string() + suffix);
}

/// Times the part of a run that is measured (everything from the first poll on): for
/// Google Benchmark's timer, and on its own for the interleaved comparison.
class stopwatch {
 public:
  virtual ~stopwatch() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
};

/// Wall-clock and this thread's CPU time of the measured part.
class interval final : public stopwatch {
 public:
  void start() override {
    wall_ = std::chrono::steady_clock::now();
    cpu_ = thread_cpu();
  }
  void stop() override {
    wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
    cpu_seconds = thread_cpu() - cpu_;
  }
  double wall_seconds = 0;
  double cpu_seconds = 0;

 private:
  static double thread_cpu() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  }
  std::chrono::steady_clock::time_point wall_;
  double cpu_ = 0;
};

/// Google Benchmark's timer.
class state_timer final : public stopwatch {
 public:
  explicit state_timer(benchmark::State& s) : s_(&s) {}
  void start() override { s_->ResumeTiming(); }
  void stop() override { s_->PauseTiming(); }

 private:
  benchmark::State* s_;
};

/// What a run left behind, for --verify.
struct outcome final {
  std::map<std::int64_t, std::pair<order, std::int64_t>> rows;
  std::map<co::partition_id, std::optional<co::position>> positions;
  friend bool operator==(const outcome&, const outcome&) = default;
};

template <class Table>
outcome outcome_of(const Table& t,
                   const std::function<std::optional<co::position>(co::partition_id)>& position,
                   const std::vector<co::partition_id>& ks) {
  outcome o;
  t.for_each([&](const co::memory::stored_row<order>& r) {
    o.rows[r.row.order_id] = {r.row, r.source_offset.value()};
  });
  for (const co::partition_id k : ks)
    o.positions[k] = position(k);
  return o;
}

outcome outcome_of(sqlite_sink& s) {
  outcome o;
  auto q = s.database().prepare(
      "SELECT order_id, customer_id, total_cents, event_seq, source_offset FROM orders_flat");
  while (q.step())
    o.rows[q.column_int64(0)] = {
        order{q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)},
        q.column_int64(4)};
  o.positions[co::partition_id{0}] = s.load_position();
  return o;
}

// ---- the pipeline ------------------------------------------------------------------------------

template <class Pipeline>
void drain(Pipeline& p, const std::vector<co::partition_id>& ks) {
  const auto done = [&] {
    for (const co::partition_id k : ks)
      if (p.read_position(k) < co::position{per_partition})
        return false;
    return true;
  };
  while (!done())
    p.poll_once();
}

outcome pipeline_at_least_once(stopwatch* state) {
  using policy = co::AtLeastOnce<>;
  using source_t = kf::assigned_source<order, policy>;
  replicated_table table;
  source_t src(options(fresh_group()), all_partitions());
  kf::offset_store store(src);
  co::pipeline<source_t, replicated_table, policy, co::with_store<kf::offset_store>> p(
      src, table, store, co::settings{.batch_size = batch});
  if (state != nullptr)
    state->start();
  drain(p, all_partitions());
  if (state != nullptr)
    state->stop();
  return outcome_of(
      table, [&](co::partition_id k) { return store.load(k); }, all_partitions());
}

outcome pipeline_transactional_memory(stopwatch* state) {
  using policy = co::TransactionalPosition<>;
  using source_t = kf::assigned_source<order, policy>;
  volatile_table table;
  source_t src(options(fresh_group()), all_partitions());
  co::pipeline<source_t, volatile_table, policy> p(src, table, co::settings{.batch_size = batch});
  if (state != nullptr)
    state->start();
  drain(p, all_partitions());
  if (state != nullptr)
    state->stop();
  return outcome_of(
      table, [&](co::partition_id k) { return table.load_position(k); }, all_partitions());
}

outcome pipeline_transactional_sqlite(stopwatch* state) {
  using policy = co::TransactionalPosition<>;
  using source_t = kf::partition_source<order, policy>;
  remove_database();
  sqlite_sink sink(database());
  source_t src(options(fresh_group()), co::partition_id{0});
  co::pipeline<source_t, sqlite_sink, policy> p(src, sink, co::settings{.batch_size = batch});
  if (state != nullptr)
    state->start();
  drain(p, {co::partition_id{0}});
  if (state != nullptr)
    state->stop();
  return outcome_of(sink);
}

// ---- the hand-written loop ---------------------------------------------------------------------

/// A librdkafka consumer as a careful hand-written loop sets it up: no auto-commit, no offsets
/// stored behind its back, no silent reset; its partitions assigned at the positions it
/// resumes from.
class raw_consumer final {
 public:
  explicit raw_consumer(const kf::consumer_options& o) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    auto set = [&](const std::string& k, const std::string& v) {
      if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK)
        throw std::runtime_error(err);
    };
    for (const auto& [k, v] : o.config)
      set(k, v);
    set("enable.auto.commit", "false");
    set("enable.auto.offset.store", "false");
    set("auto.offset.reset", "error");
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk_ == nullptr)
      throw std::runtime_error(err);
    rd_kafka_poll_set_consumer(rk_);
  }
  raw_consumer(const raw_consumer&) = delete;
  raw_consumer& operator=(const raw_consumer&) = delete;
  ~raw_consumer() {
    rd_kafka_consumer_close(rk_);
    rd_kafka_destroy(rk_);
  }

  /// Checks each start against its partition's watermarks and assigns them there.
  void start_at(const std::map<co::partition_id, std::int64_t>& starts) {
    rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(partition_count);
    for (const auto& [k, start] : starts) {
      std::int64_t lo = 0, hi = 0;
      if (rd_kafka_query_watermark_offsets(rk_, shared_topic().name.c_str(), k.value(), &lo, &hi,
                                           10000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
          start < lo || start > hi)
        throw std::runtime_error("cannot start there");
      rd_kafka_topic_partition_list_add(l, shared_topic().name.c_str(), k.value())->offset = start;
    }
    rd_kafka_assign(rk_, l);
    rd_kafka_topic_partition_list_destroy(l);
  }

  std::optional<std::int64_t> committed(co::partition_id k) {
    rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, shared_topic().name.c_str(), k.value());
    rd_kafka_committed(rk_, l, 10000);
    const std::int64_t o = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    return o < 0 ? std::nullopt : std::optional{o};
  }

  void commit(co::partition_id k, std::int64_t position) {
    rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, shared_topic().name.c_str(), k.value())->offset = position;
    const auto e = rd_kafka_commit_queue(rk_, l, nullptr, nullptr, nullptr);
    rd_kafka_topic_partition_list_destroy(l);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error(rd_kafka_err2str(e));
  }

  /// Up to `max` records, one rd_kafka_consumer_poll at a time: the first waits, the rest do not.
  std::vector<co::partitioned_logged<order>>& poll(std::size_t max) {
    batch_.clear();
    fingerprints_.clear();
    for (int wait = 100; batch_.size() < max; wait = 0) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, wait);
      if (m == nullptr)
        break;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        const std::string why = rd_kafka_message_errstr(m);
        rd_kafka_message_destroy(m);
        throw std::runtime_error(why);
      }
      batch_.push_back({co::partition_id{m->partition}, co::offset{m->offset},
                        kf::trivial_codec<order>::decode(
                            std::span(static_cast<const std::byte*>(m->payload), m->len))});
      if (keep_fingerprints_)
        fingerprints_.push_back(kf::detail::message_fingerprint(*m));
      rd_kafka_message_destroy(m);
    }
    return batch_;
  }

  /// As the library's source does for a sink that keeps fingerprints beside positions: each
  /// message's fingerprint, beside the batch.
  void keep_fingerprints() noexcept { keep_fingerprints_ = true; }
  [[nodiscard]] std::uint64_t fingerprint(std::size_t i) const { return fingerprints_[i]; }

 private:
  rd_kafka_t* rk_ = nullptr;
  std::vector<co::partitioned_logged<order>> batch_;
  std::vector<std::uint64_t> fingerprints_;
  bool keep_fingerprints_ = false;
};

/// The position each partition of a batch moves to, in ascending partition order.
std::map<co::partition_id, std::int64_t> ends_of(
    const std::vector<co::partitioned_logged<order>>& rs) {
  std::map<co::partition_id, std::int64_t> ends;
  for (const auto& r : rs)
    ends[r.source_partition] = r.source_offset.value() + 1;
  return ends;
}

bool all_read(const std::map<co::partition_id, std::int64_t>& read) {
  for (const auto& [k, at] : read)
    if (at < per_partition)
      return false;
  return true;
}

outcome handwritten_at_least_once(stopwatch* state) {
  replicated_table table;
  raw_consumer c(options(fresh_group()));
  const auto ks = all_partitions();
  if (state != nullptr)
    state->start();
  std::map<co::partition_id, std::int64_t> read;
  for (const co::partition_id k : ks)
    read[k] = c.committed(k).value_or(0);
  c.start_at(read);
  while (!all_read(read)) {
    const auto& rs = c.poll(batch);
    if (rs.empty())
      continue;
    table.begin();
    for (const auto& r : rs)
      table.apply(r.source_partition, r.source_offset, r.event);
    table.commit();
    for (const auto& [k, end] : ends_of(rs)) {
      c.commit(k, end);
      read[k] = end;
    }
  }
  if (state != nullptr)
    state->stop();
  return outcome_of(
      table,
      [&](co::partition_id k) {
        const auto o = c.committed(k);
        return o ? std::optional{co::position{*o}} : std::nullopt;
      },
      ks);
}

template <class Sink>
void handwritten_transactional(Sink& sink, const std::vector<co::partition_id>& ks,
                               stopwatch* state) {
  raw_consumer c(options(fresh_group()));
  constexpr bool partitioned = requires {
    sink.claim_next(co::partition_id{0});
  };
  if (state != nullptr)
    state->start();
  std::map<co::partition_id, co::epoch> owner;
  std::map<co::partition_id, std::int64_t> read;
  sink.begin();
  for (const co::partition_id k : ks) {
    co::claimed claim;
    if constexpr (partitioned)
      claim = sink.claim_next(k);
    else
      claim = sink.claim_next();
    owner[k] = claim.owner;
    read[k] = claim.stored.value_or(co::position{0}).value();
  }
  sink.commit();
  // A sink that keeps fingerprints stores the last record's beside each position, as the
  // pipeline does (the positions here start at 0: nothing to compare at the start).
  constexpr bool fingerprints = co::fingerprinting_sink<Sink>;
  if constexpr (fingerprints)
    c.keep_fingerprints();
  c.start_at(read);
  while (!all_read(read)) {
    const auto& rs = c.poll(batch);
    if (rs.empty())
      continue;
    sink.begin();
    for (const auto& r : rs) {
      if constexpr (partitioned)
        sink.apply(r.source_partition, r.source_offset, r.event);
      else
        sink.apply(r.source_offset, r.event);
    }
    for (const auto& [k, end] : ends_of(rs)) {
      if constexpr (fingerprints) {
        std::size_t last = rs.size() - 1;
        while (rs[last].source_partition != k)
          --last;
        sink.store_position(partitioned ? k : co::partition_id{0}, co::position{end}, owner[k],
                            c.fingerprint(last));
      } else if constexpr (partitioned) {
        sink.store_position(k, co::position{end}, owner[k]);
      } else {
        sink.store_position(co::position{end}, owner[k]);
      }
      read[k] = end;
    }
    sink.commit();
  }
  if (state != nullptr)
    state->stop();
}

outcome handwritten_transactional_memory(stopwatch* state) {
  volatile_table table;
  handwritten_transactional(table, all_partitions(), state);
  return outcome_of(
      table, [&](co::partition_id k) { return table.load_position(k); }, all_partitions());
}

outcome handwritten_transactional_sqlite(stopwatch* state) {
  remove_database();
  sqlite_sink sink(database());
  handwritten_transactional(sink, {co::partition_id{0}}, state);
  return outcome_of(sink);
}

// ---- running and reporting -----------------------------------------------------------------

using run_fn = outcome (*)(stopwatch*);

struct case_def final {
  const char* name;
  run_fn pipeline;
  run_fn handwritten;
  std::int64_t records;  ///< consumed per run
  std::size_t rows;      ///< orders in what it reads
};

const case_def cases[] = {
    {"at_least_once/memory", &pipeline_at_least_once, &handwritten_at_least_once,
     per_partition* partition_count, orders_per_partition* partition_count},
    {"transactional/memory", &pipeline_transactional_memory, &handwritten_transactional_memory,
     per_partition* partition_count, orders_per_partition* partition_count},
    {"transactional/sqlite", &pipeline_transactional_sqlite, &handwritten_transactional_sqlite,
     per_partition, orders_per_partition},
};

void run(benchmark::State& state, run_fn f, std::int64_t records) {
  shared_topic();
  state_timer timer(state);
  for (auto _ : state) {
    state.PauseTiming();
    benchmark::DoNotOptimize(f(&timer).rows.size());
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * records);
  state.counters["ns_per_record"] =
      benchmark::Counter(static_cast<double>(state.iterations() * records),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// The comparison the ratio is read from. On a machine shared with other work, consecutive
/// benchmarks see different loads; here each round runs the pipeline and its twin back to back
/// (alternating which goes first), and the ratio is the median of the rounds' ratios.
///   wall: records/s of the pipeline over the hand-written loop's (>= 0.9 is the target);
///   cpu:  the same for the consuming thread's CPU time (librdkafka's own threads excluded):
///         what the loop itself costs.
void compare(int rounds) {
  shared_topic();
  std::printf("\n%-24s %14s %14s %10s %10s  %s\n", "case (median of rounds)", "pipeline ns/rec",
              "hand ns/rec", "wall ratio", "cpu ratio", "target (wall >= 0.9)");
  for (const case_def& c : cases) {
    std::vector<double> pw, hw, wall_ratio, cpu_ratio;
    for (int r = 0; r < rounds; ++r) {
      interval p, h;
      if (r % 2 == 0) {
        c.pipeline(&p);
        c.handwritten(&h);
      } else {
        c.handwritten(&h);
        c.pipeline(&p);
      }
      pw.push_back(p.wall_seconds);
      hw.push_back(h.wall_seconds);
      wall_ratio.push_back(h.wall_seconds / p.wall_seconds);
      if (std::getenv("KAFKA_BENCH_ROUNDS") != nullptr)
        std::printf("  %s round %d: pipeline %.1f ms (cpu %.1f), hand %.1f ms (cpu %.1f)\n", c.name,
                    r, p.wall_seconds * 1e3, p.cpu_seconds * 1e3, h.wall_seconds * 1e3,
                    h.cpu_seconds * 1e3);
      cpu_ratio.push_back(h.cpu_seconds / p.cpu_seconds);
    }
    const double ratio = median(wall_ratio);
    std::printf("%-24s %14.1f %14.1f %10.3f %10.3f  %s\n", c.name,
                median(pw) * 1e9 / static_cast<double>(c.records),
                median(hw) * 1e9 / static_cast<double>(c.records), ratio, median(cpu_ratio),
                ratio >= 0.9 ? "met" : "MISSED");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  if (argc >= 3 && std::strcmp(argv[1], "--rounds") == 0) {
    rounds = std::atoi(argv[2]);
    argv[2] = argv[0];
    argc -= 2;
    argv += 2;
  }
  if (argc >= 2 && std::strcmp(argv[1], "--compare") == 0) {
    compare(rounds);
    remove_database();
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "--verify") == 0) {
    bool ok = true;
    for (const case_def& c : cases) {
      const outcome p = c.pipeline(nullptr);
      const outcome h = c.handwritten(nullptr);
      bool at_end = !p.positions.empty();
      for (const auto& [k, at] : p.positions)
        at_end = at_end && at == co::position{per_partition};
      const bool same = p == h && at_end && p.rows.size() == c.rows;
      std::printf("%-22s rows %zu, %zu partitions at %lld: %s\n", c.name, p.rows.size(),
                  p.positions.size(), static_cast<long long>(per_partition),
                  same ? "same as the hand-written loop" : "DIFFERENT");
      ok = ok && same;
    }
    remove_database();
    return ok ? 0 : 1;
  }
  for (const case_def& c : cases) {
    for (const auto& [variant, f] :
         {std::pair{"pipeline", c.pipeline}, {"handwritten", c.handwritten}}) {
      benchmark::RegisterBenchmark((std::string(variant) + "/kafka/" + c.name).c_str(),
                                   [f = f, n = c.records](benchmark::State& s) { run(s, f, n); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  compare(rounds);
  remove_database();
  return 0;
}
