// SPDX-License-Identifier: BSL-1.0
// Rows per second through `pipeline` into PostgreSQL against the hand-written libpq loop doing
// the same work (bench/postgres_cases.hpp), for TransactionalPosition at batch 1, 64 and 512, on
// a throwaway server with fsync=on (the sink `synced`) and one with fsync=off (`buffered`) --
// side by side in one run. A library case is `pipeline/postgres/TransactionalPosition/<server>/
// batch:<B>`; its twin differs only by the first word: `handwritten/postgres/...`.
//
//   postgres_bench [--pairs=N] [--table=FILE] [benchmark flags]
//                                      start the servers, run N pairs of every case (wall
//                                      clock), print the table of medians and of the pairs'
//                                      ratios (and write it to FILE, tab-separated)
//   postgres_bench --server-malloc=default ...
//                                      the same with the servers on glibc's default heap
//                                      trimming (see `server_environment` below)
//   postgres_bench --verify            check that the twin sends exactly the statements the
//                                      library sends (pg_stat_statements: the same SQL text, as
//                                      many times) and leaves the same table and position, at
//                                      each batch size; and that the check tells apart a twin
//                                      that differs
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "postgres_cases.hpp"
#include "support/lab/pg_server.hpp"

namespace {

using namespace postgres_bench;

constexpr std::size_t batches[] = {1, 64, 512};

/// The servers' heap. With glibc's defaults a PostgreSQL backend can fall into returning the
/// top of its heap to the kernel after every transaction and taking it back in the next one
/// (a brk() pair, page faults, a TLB flush: about 14 us per transaction here). Whether a
/// session falls into it depends on that backend's allocation history, not on what the client
/// sends: with byte-identical traffic, measured with strace on the two backends, the library's
/// session made 1,200 brk() calls in 2,050 batch-1 transactions, the twin's none, and the
/// library's batch-1 rate fell to 0.75x (fsync=off). A trim threshold above what one
/// transaction frees stops it for every session; the benchmark starts its servers so, to
/// compare the clients, and `--server-malloc=default` shows the difference it makes.
/// (docs/adapters.md recommends the same setting for servers running on glibc.)
constexpr const char* server_trim_threshold = "glibc.malloc.trim_threshold=67108864";

bool set_server_malloc(bool tuned) {
  if (!tuned)
    return true;
  std::string tunables = server_trim_threshold;
  if (const char* had = std::getenv("GLIBC_TUNABLES"); had != nullptr && *had != '\0')
    tunables = std::string(had) + ":" + tunables;
  // Read by the servers' processes when they start (they inherit the environment); this
  // process has read its own tunables already.
  return ::setenv("GLIBC_TUNABLES", tunables.c_str(), 1) == 0;
}

struct servers {
  crash_lab::pg_server fsync_on{crash_lab::pg_server_options{.fsync = true}};
  crash_lab::pg_server fsync_off{crash_lab::pg_server_options{.fsync = false}};
  const crash_lab::pg_server& of(server_id s) const {
    return s == server_id::fsync_on ? fsync_on : fsync_off;
  }
};
servers* the_servers = nullptr;

template <class Case>
struct instance {
  instance(server_id s, const std::string& schema, std::size_t batch) {
    const std::string conninfo = the_servers->of(s).conninfo();
    seed(conninfo, schema);
    c = std::make_unique<Case>(conninfo, schema, batch);
  }
  std::unique_ptr<Case> c;
};

template <class Case>
std::string schema_of(const char* variant, server_id s, std::size_t batch) {
  return std::string(variant) + "_" + name(s) + "_" + std::to_string(batch);
}

/// Each case's instance lives for the whole run, so a repetition measures the loop, not the
/// set-up; at the end of a round it starts over on a freshly seeded schema.
template <class Case>
std::unique_ptr<instance<Case>>& persistent_slot(const char* variant, server_id s,
                                                 std::size_t batch) {
  static std::map<std::pair<server_id, std::size_t>, std::unique_ptr<instance<Case>>> instances;
  auto& slot = instances[{s, batch}];
  if (!slot)
    slot = std::make_unique<instance<Case>>(s, schema_of<Case>(variant, s, batch), batch);
  return slot;
}

template <class Case>
void run_case(benchmark::State& state, const char* variant, server_id s, std::size_t batch) {
  instance<Case>* c = persistent_slot<Case>(variant, s, batch).get();
  std::int64_t records = 0;
  for (auto _ : state) {
    std::size_t n = c->c->step();
    if (n == 0) {  // the end of a round
      state.PauseTiming();
      auto& slot = persistent_slot<Case>(variant, s, batch);
      slot.reset();
      slot = std::make_unique<instance<Case>>(s, schema_of<Case>(variant, s, batch), batch);
      c = slot.get();
      state.ResumeTiming();
      n = c->c->step();
    }
    records += static_cast<std::int64_t>(n);
  }
  state.SetItemsProcessed(records);
}

/// Records per repetition: a few tens of milliseconds at each speed, so the two runs of a pair
/// see the same load, and at least 32 commits with fsync=on, where each waits for the disk and
/// one slow flush would otherwise decide a repetition.
constexpr std::int64_t records_per_repetition(server_id s, std::size_t batch) {
  if (batch == 1)
    return s == server_id::fsync_on ? 128 : 512;
  if (batch == 64)
    return s == server_id::fsync_on ? 2048 : 4096;
  return 16384;
}

struct config {
  server_id server;
  std::size_t batch;
};

template <class Case>
void register_one(const char* variant, const config& c) {
  const std::string run = std::string(variant) + "/postgres/TransactionalPosition/" +
                          name(c.server) + "/batch:" + std::to_string(c.batch);
  const server_id s = c.server;
  const std::size_t batch = c.batch;
  benchmark::RegisterBenchmark(
      run.c_str(),
      [variant, s, batch](benchmark::State& st) { run_case<Case>(st, variant, s, batch); })
      ->Iterations(records_per_repetition(c.server, c.batch) / static_cast<std::int64_t>(batch))
      ->UseRealTime();
}

template <class Durability>
void register_pair(const config& c, bool library_first) {
  if (library_first) {
    register_one<pipeline_case<Durability>>("pipeline", c);
    register_one<handwritten_case<Durability>>("handwritten", c);
  } else {
    register_one<handwritten_case<Durability>>("handwritten", c);
    register_one<pipeline_case<Durability>>("pipeline", c);
  }
}

/// `pairs` repetitions of every case, in pairs: each library repetition beside its twin's,
/// the order within a pair alternating, the configurations shuffled every round (the ratio
/// within a pair is steady where medians over a long, noisy run are not).
void register_pairs(int pairs) {
  std::vector<config> configs;
  for (const server_id s : {server_id::fsync_on, server_id::fsync_off})
    for (const std::size_t b : batches)
      configs.push_back({s, b});
  std::mt19937 rng(20240614);
  for (int round = 0; round < pairs; ++round) {
    std::shuffle(configs.begin(), configs.end(), rng);
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const config& c = configs[i];
      const bool library_first = (static_cast<std::size_t>(round) + i) % 2 == 0;
      if (c.server == server_id::fsync_on)
        register_pair<pg::synced>(c, library_first);
      else
        register_pair<pg::buffered>(c, library_first);
    }
  }
}

using bench_support::case_of;
using bench_support::median;

/// The usual console output, then per case the median rows/s of each variant and the median
/// of the pairs' ratios (library / hand-written) against the target; with a table file, the
/// same figures as tab-separated columns (server, batch, pipeline, hand-written, pair ratio,
/// pairs) for plotting.
class ratio_reporter final : public benchmark::ConsoleReporter {
 public:
  explicit ratio_reporter(std::string table) : table_(std::move(table)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const auto rate = r.counters.find("items_per_second");
      if (r.run_type != Run::RT_Iteration || rate == r.counters.end())
        continue;
      const std::string run = case_of(r.run_name.str());
      const auto slash = run.find('/');
      rates_[run.substr(slash + 1)][run.substr(0, slash)].push_back(rate->second.value);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::FILE* table = table_.empty() ? nullptr : std::fopen(table_.c_str(), "w");
    std::printf("\n%-52s %5s %10s %11s %8s %8s  %s\n", "case (median rows/s)", "pairs", "pipeline",
                "handwritten", "med/med", "med pair", "target (median pair ratio)");
    for (const auto& [run, v] : rates_) {
      const auto& p = v.at("pipeline");
      const auto& h = v.at("handwritten");
      std::vector<double> ratios;
      for (std::size_t i = 0; i < std::min(p.size(), h.size()); ++i)
        ratios.push_back(p[i] / h[i]);
      const double pair = median(ratios);
      const bool one = run.ends_with("batch:1");
      const bool big = run.ends_with("batch:512");
      const double target = one ? 0.95 : 0.9;
      std::printf("%-52s %5zu %10.0f %11.0f %8.3f %8.3f  ", run.c_str(), ratios.size(), median(p),
                  median(h), median(p) / median(h), pair);
      if (one || big)
        std::printf(">= %.2f: %s\n", target, pair >= target ? "met" : "MISSED");
      else
        std::printf("\n");
      if (table != nullptr) {
        const auto server = run.find("fsync_on") != std::string::npos ? "fsync_on" : "fsync_off";
        const auto batch = run.substr(run.find("batch:") + 6);
        std::fprintf(table, "%s\t%s\t%.0f\t%.0f\t%.3f\t%zu\n", server, batch.c_str(), median(p),
                     median(h), pair, ratios.size());
      }
    }
    if (table != nullptr)
      std::fclose(table);
  }

 private:
  std::string table_;
  std::map<std::string, std::map<std::string, std::vector<double>>> rates_;
};

// ---- --verify --------------------------------------------------------------------------------

struct statement_count {
  std::string query;
  std::int64_t calls;
  friend bool operator==(const statement_count&, const statement_count&) = default;
};

std::vector<statement_count> statements(admin& a) {
  std::vector<statement_count> out;
  const pg::result r = a.exec(
      "SELECT query, sum(calls)::bigint FROM pg_stat_statements WHERE query NOT LIKE "
      "'%pg_stat_statements%' GROUP BY query ORDER BY query");
  for (int i = 0; i < r.rows(); ++i)
    out.push_back({std::string(r.text(i, 0)), r.integer(i, 1)});
  return out;
}

std::string differences(const std::vector<statement_count>& library,
                        const std::vector<statement_count>& twin) {
  std::string out;
  for (const auto& s : library)
    if (std::find(twin.begin(), twin.end(), s) == twin.end())
      out += "    library only: " + std::to_string(s.calls) + "x " + s.query.substr(0, 120) + "\n";
  for (const auto& s : twin)
    if (std::find(library.begin(), library.end(), s) == library.end())
      out += "    twin only:    " + std::to_string(s.calls) + "x " + s.query.substr(0, 120) + "\n";
  return out;
}

/// A twin that is not one: the same batches, but a row per statement. --verify must tell it
/// apart, or the check proves nothing.
class per_row_twin final {
 public:
  per_row_twin(const std::string& conninfo, const std::string& schema, std::size_t batch)
      : inner_(conninfo, schema, 1), batch_(batch) {}
  std::size_t step() {
    std::size_t n = 0;
    for (std::size_t i = 0; i < batch_; ++i)
      n += inner_.step();
    return n;
  }

 private:
  handwritten_case<pg::buffered> inner_;
  std::size_t batch_;
};

template <class Case>
std::vector<statement_count> run_traced(const std::string& conninfo, const std::string& schema,
                                        std::size_t batch, std::int64_t records) {
  seed(conninfo, schema);
  Case c(conninfo, schema, batch);
  admin a(conninfo);
  a.exec("SELECT pg_stat_statements_reset()");
  std::int64_t done = 0;
  while (done < records)
    done += static_cast<std::int64_t>(c.step());
  return statements(a);
}

int verify() {
  crash_lab::pg_server server(crash_lab::pg_server_options{
      .fsync = false,
      .extra_settings = "-c shared_preload_libraries=pg_stat_statements"
                        " -c pg_stat_statements.track_utility=on"});
  const std::string conninfo = server.conninfo();
  admin(conninfo).exec("CREATE EXTENSION pg_stat_statements");
  int failures = 0;
  for (const std::size_t batch : batches) {
    const std::int64_t records = static_cast<std::int64_t>(batch) * 8;
    const auto library = run_traced<pipeline_case<pg::buffered>>(conninfo, "lib", batch, records);
    const auto twin = run_traced<handwritten_case<pg::buffered>>(conninfo, "twin", batch, records);
    const std::string diff = differences(library, twin);
    admin a(conninfo);
    const auto rows_differ =
        a.exec(
             "(SELECT * FROM lib.orders_flat EXCEPT SELECT * FROM twin.orders_flat) UNION ALL "
             "(SELECT * FROM twin.orders_flat EXCEPT SELECT * FROM lib.orders_flat)")
            .rows();
    const auto positions_differ =
        a.exec(
             "SELECT 1 FROM lib.commit_order_positions l, twin.commit_order_positions t WHERE "
             "l.position IS DISTINCT FROM t.position")
            .rows();
    const bool same = diff.empty() && rows_differ == 0 && positions_differ == 0;
    std::printf("batch %zu: %zu statements, %s\n", batch, library.size(),
                same ? "the twin sends the same statements and leaves the same table and position"
                     : "DIFFERENT");
    if (!same) {
      std::printf("%s    rows that differ: %d, positions that differ: %d\n", diff.c_str(),
                  rows_differ, positions_differ);
      ++failures;
    }
    if (batch > 1) {
      const auto wrong = run_traced<per_row_twin>(conninfo, "wrong", batch, records);
      const bool told_apart = !differences(library, wrong).empty();
      std::printf("batch %zu: a twin sending a row per statement is %s\n", batch,
                  told_apart ? "told apart" : "NOT TOLD APART");
      failures += told_apart ? 0 : 1;
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--verify") == 0) {
    try {
      return verify();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "postgres_bench --verify: %s\n", e.what());
      return 2;
    }
  }
  int pairs = 9;
  std::string table;
  bool tuned_malloc = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--pairs=", 8) == 0)
      pairs = std::atoi(argv[i] + 8);
    if (std::strncmp(argv[i], "--table=", 8) == 0)
      table = argv[i] + 8;
    if (std::strcmp(argv[i], "--server-malloc=default") == 0)
      tuned_malloc = false;
  }
  benchmark::Initialize(&argc, argv);
  if (!set_server_malloc(tuned_malloc)) {
    std::perror("postgres_bench: setenv GLIBC_TUNABLES");
    return 2;
  }
  std::printf("servers' heap: %s\n",
              tuned_malloc ? server_trim_threshold : "glibc defaults (--server-malloc=default)");
  try {
    servers s;
    the_servers = &s;
    register_pairs(pairs);
    ratio_reporter reporter(table);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "postgres_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
