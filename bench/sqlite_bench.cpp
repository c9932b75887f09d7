// SPDX-License-Identifier: BSL-1.0
// Rows per second through `pipeline` into SQLite against the hand-written sqlite3 loop that
// issues the same statements, for TransactionalPosition and AtLeastOnce (SQLite position
// store), WAL with synchronous FULL and NORMAL, at batch 1, 64 and 512 — side by side in one
// run. A library case is `pipeline/sqlite/<Policy>/<sync>/batch:<B>`; its twin differs only by
// the first word: `handwritten/sqlite/<Policy>/<sync>/batch:<B>`.
//
//   sqlite_bench [benchmark flags]   run (wall clock: a commit waits for its fsync), then print
//                                    the ratio table of medians
//   sqlite_bench --verify            check that each twin executes the library's statements, in
//                                    the same order, with the same values, on the same
//                                    connections; and that the check tells apart twins that
//                                    deliberately differ
//   sqlite_bench --count V P S B N   run variant V (pipeline|handwritten, or for AtLeastOnce
//                                    pipeline_own_connection: the position store on a
//                                    connection of its own) of policy P at synchronous S
//                                    (FULL|NORMAL) and batch B for N records (the callgrind
//                                    driver, see bench/sqlite_callgrind_report.sh)
#include <benchmark/benchmark.h>

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sqlite_cases.hpp"

namespace {

using namespace sqlite_bench;

constexpr std::size_t batches[] = {1, 64, 512};

/// Each case's instance lives for the whole run, so a repetition measures the loop, not the
/// set-up: seeding and opening happen once, before the case's first timed batch, and every
/// round after the first starts on a database that has already been written to.
/// (Through a unique_ptr, not a std::optional: g++ 12 sees a false -Wmaybe-uninitialized in
/// the nested optionals' destructors when an optional of them is reset.)
template <class Case>
std::unique_ptr<instance<Case>>& persistent_slot(std::size_t batch) {
  static std::map<std::size_t, std::unique_ptr<instance<Case>>> instances;
  auto& slot = instances[batch];
  if (!slot)
    slot = std::make_unique<instance<Case>>(batch);
  return slot;
}

template <class Case>
void run_case(benchmark::State& state, std::size_t batch) {
  instance<Case>* c = persistent_slot<Case>(batch).get();
  std::int64_t records = 0;
  for (auto _ : state) {
    std::size_t n = c->c.step();
    if (n == 0) {  // the end of a round: start over on a freshly seeded database
      state.PauseTiming();
      auto& slot = persistent_slot<Case>(batch);
      slot.reset();
      slot = std::make_unique<instance<Case>>(batch);
      c = slot.get();
      state.ResumeTiming();
      n = c->c.step();
    }
    records += static_cast<std::int64_t>(n);
  }
  state.SetItemsProcessed(records);
}

/// Records per repetition: tens of milliseconds at each speed on a loaded machine. Short, so
/// that the two runs of a pair see the same load; long enough that a repetition spans at least
/// 16 commits under FULL (one fsync's latency varies several-fold from one to the next) and
/// many of the scheduler's time slices (whose share of the CPU varies from one slice to the
/// next when other processes compete for the cores).
constexpr std::int64_t records_per_repetition(sync_id s, std::size_t batch) {
  if (batch == 1)
    return s == sync_id::full ? 16 : 1024;
  if (batch == 64)
    return s == sync_id::full ? 1024 : 16384;
  return s == sync_id::full ? 8192 : 32768;
}

struct config {
  policy_id policy;
  sync_id sync;
  std::size_t batch;
};

template <class Case>
void register_one(const char* variant, const config& c) {
  const std::string run = std::string(variant) + "/sqlite/" + name(c.policy) + "/" + name(c.sync) +
                          "/batch:" + std::to_string(c.batch);
  const std::size_t batch = c.batch;
  // Real time: a commit's cost is mostly its fsync, which no CPU clock sees.
  benchmark::RegisterBenchmark(run.c_str(),
                               [batch](benchmark::State& s) { run_case<Case>(s, batch); })
      ->Iterations(records_per_repetition(c.sync, c.batch) / static_cast<std::int64_t>(batch))
      ->UseRealTime();
}

template <policy_id P, sync_id S>
void register_pair(const config& c, bool library_first) {
  if (library_first) {
    register_one<pipeline_case<P, S>>("pipeline", c);
    register_one<handwritten_case<P, S>>("handwritten", c);
  } else {
    register_one<handwritten_case<P, S>>("handwritten", c);
    register_one<pipeline_case<P, S>>("pipeline", c);
  }
}

/// `pairs` repetitions of every case, registered (and so run) in pairs: each library
/// repetition right beside its twin's, the order within a pair alternating, the configurations
/// shuffled in every round. fsync latency here swings by 10x with the load other processes put
/// on the disk; two runs tens of milliseconds apart see the same load, so the ratio within a
/// pair is steady where two medians taken over a long run are not.
void register_pairs(int pairs) {
  std::vector<config> configs;
  for (const policy_id p : {policy_id::transactional_position, policy_id::at_least_once})
    for (const sync_id s : {sync_id::full, sync_id::normal})
      for (const std::size_t b : batches)
        configs.push_back({p, s, b});
  std::mt19937 rng(20240613);
  for (int round = 0; round < pairs; ++round) {
    std::shuffle(configs.begin(), configs.end(), rng);
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const config& c = configs[i];
      const bool library_first = (static_cast<std::size_t>(round) + i) % 2 == 0;
      using enum policy_id;
      using enum sync_id;
      if (c.policy == transactional_position && c.sync == full)
        register_pair<transactional_position, full>(c, library_first);
      else if (c.policy == transactional_position)
        register_pair<transactional_position, normal>(c, library_first);
      else if (c.sync == full)
        register_pair<at_least_once, full>(c, library_first);
      else
        register_pair<at_least_once, normal>(c, library_first);
    }
  }
}

using bench_support::case_of;
using bench_support::median;

/// Prints the usual console output, then per case the median rows/s of each variant and the
/// median of the pairs' ratios (library / hand-written).
class ratio_reporter final : public benchmark::ConsoleReporter {
 public:
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
    std::printf("\n%-44s %6s %12s %12s %9s %9s  %s\n", "case (median rows/s)", "pairs", "pipeline",
                "handwritten", "med/med", "med pair", "target (median of the pairs' ratios)");
    for (const auto& [run, v] : rates_) {
      const auto& p = rates(v, "pipeline");
      const auto& h = rates(v, "handwritten");
      std::vector<double> ratios;
      for (std::size_t i = 0; i < std::min(p.size(), h.size()); ++i)
        ratios.push_back(p[i] / h[i]);
      const double pair = median(ratios);
      const double target = run.ends_with("batch:1") ? 0.9 : 0.95;
      std::printf("%-44s %6zu %12.0f %12.0f %9.3f %9.3f  >= %.2f: %s\n", run.c_str(), ratios.size(),
                  median(p), median(h), median(p) / median(h), pair, target,
                  pair >= target ? "met" : "MISSED");
    }
  }

 private:
  using by_variant = std::map<std::string, std::vector<double>>;
  static const std::vector<double>& rates(const by_variant& m, const char* k) {
    static const std::vector<double> none;
    const auto it = m.find(k);
    return it == m.end() ? none : it->second;
  }
  std::map<std::string, by_variant> rates_;
};

// ---- --verify: the statements both execute, traced -----------------------------------------

struct statement_trace {
  bool recording = false;
  std::intptr_t connections = 0;
  std::vector<std::string> statements;
};
statement_trace trace;

// SQLITE_TRACE_STMT: a statement starts running. Logged with its bound values (expanded) and
// the connection it ran on, numbered in the order the case opened them.
int on_statement(unsigned, void* connection, void* stmt, void*) {
  char* text = sqlite3_expanded_sql(static_cast<sqlite3_stmt*>(stmt));
  trace.statements.push_back(std::to_string(reinterpret_cast<std::intptr_t>(connection)) + ": " +
                             (text != nullptr ? text : "(no text)"));
  sqlite3_free(text);
  return 0;
}

// Runs inside sqlite3_open_v2 for every connection (sqlite3_auto_extension): both the
// adapter's connections and the twin's are traced from their first statement, pragmas
// included, without either knowing.
int on_open(sqlite3* db, const char**, const sqlite3_api_routines*) {
  if (trace.recording) {
    const std::intptr_t id = ++trace.connections;
    sqlite3_trace_v2(db, SQLITE_TRACE_STMT, &on_statement, reinterpret_cast<void*>(id));
  }
  return SQLITE_OK;
}

/// The statements a case executes from opening its connections to consuming `records`, on a
/// database seeded with the position `seeded_position`.
template <class Case>
std::vector<std::string> statements_of(std::size_t batch, std::size_t records,
                                       std::int64_t seeded_position = orders) {
  seeded_database db(seeded_position);  // seeded before recording: not part of either trace
  trace = {};
  trace.recording = true;
  {
    Case c(db.file, batch);
    std::size_t done = 0;
    while (done < records) {
      const std::size_t n = c.step();
      if (n == 0)
        break;
      done += n;
    }
  }
  trace.recording = false;
  return std::move(trace.statements);
}

std::size_t count_of(const std::vector<std::string>& v, const std::string& prefix,
                     const std::string& part = "") {
  std::size_t n = 0;
  for (const auto& s : v)
    n += s.starts_with(prefix) && s.find(part) != std::string::npos ? 1 : 0;
  return n;
}

/// "same", or where the two sequences first differ.
std::string compare(const std::vector<std::string>& library, const std::vector<std::string>& twin) {
  const std::size_t n = std::min(library.size(), twin.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (library[i] != twin[i])
      return "differ at statement " + std::to_string(i + 1) +
             ":\n      library: " + library[i].substr(0, 160) +
             "\n      twin:    " + twin[i].substr(0, 160);
  }
  if (library.size() != twin.size())
    return "differ in length: library " + std::to_string(library.size()) + ", twin " +
           std::to_string(twin.size());
  return "same";
}

/// Enough records for several batches at every size (and few fsyncs at batch 1).
constexpr std::size_t verify_records(std::size_t batch) {
  return std::max<std::size_t>(40, 2 * batch + batch / 2);
}

template <policy_id P, sync_id S>
bool verify_config() {
  bool ok = true;
  for (const std::size_t batch :
       {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{512}}) {
    const std::size_t records = verify_records(batch);
    const auto library = statements_of<pipeline_case<P, S>>(batch, records);
    const auto twin = statements_of<handwritten_case<P, S>>(batch, records);
    // The trace must have seen the loop itself, not only an empty or set-up-only run: one
    // upsert per record and one position write per batch, on the sink's connection (the
    // AtLeastOnce store shares it): an owner's update under TransactionalPosition, the
    // store's upsert under AtLeastOnce.
    const std::size_t units = (records + batch - 1) / batch;
    const std::size_t rows = count_of(library, "1: INSERT INTO \"orders_flat\"");
    const std::size_t positions =
        count_of(library, "1: INSERT INTO \"commit_order_positions\"",
                 "DO UPDATE SET position = excluded.position") +
        count_of(library, "1: UPDATE \"commit_order_positions\" SET position = ");
    const std::string verdict = compare(library, twin);
    const bool seen = rows == units * batch && positions == units;
    std::printf(
        "%-22s %-6s batch %-4zu %5zu statements (%zu row upserts, %zu position "
        "writes): %s%s\n",
        name(P), name(S), batch, library.size(), rows, positions, verdict.c_str(),
        seen ? "" : "  -- the trace MISSED the loop's statements");
    ok = ok && verdict == "same" && seen;
  }
  return ok;
}

/// The check must fail for a twin that departs from the library: each deliberate flaw is run
/// against the library and must be told apart.
template <policy_id P, flaw F>
bool flaw_is_caught(const char* what) {
  const auto library = statements_of<pipeline_case<P, sync_id::normal>>(7, 50);
  const auto twin = statements_of<handwritten_case<P, sync_id::normal, F>>(7, 50);
  const std::string verdict = compare(library, twin);
  const bool caught = verdict != "same";
  std::printf("self-test: a twin that %s (%s): %s\n    %s\n", what, name(P),
              caught ? "told apart, as it must be" : "NOT TOLD APART", verdict.c_str());
  return caught;
}

bool verify() {
  if (sqlite3_auto_extension(reinterpret_cast<void (*)()>(&on_open)) != SQLITE_OK) {
    std::puts("cannot register the tracing extension");
    return false;
  }
  // Every configuration runs and reports, even after a mismatch.
  const bool same[] = {
      verify_config<policy_id::transactional_position, sync_id::full>(),
      verify_config<policy_id::transactional_position, sync_id::normal>(),
      verify_config<policy_id::at_least_once, sync_id::full>(),
      verify_config<policy_id::at_least_once, sync_id::normal>(),
  };
  // The reference configuration the callgrind report measures has a twin of its own.
  const bool reference = [] {
    using library_t = pipeline_case<policy_id::at_least_once, sync_id::normal, true>;
    using twin_t =
        handwritten_case<policy_id::at_least_once, sync_id::normal, flaw::second_connection>;
    const auto library = statements_of<library_t>(7, verify_records(7));
    const auto twin = statements_of<twin_t>(7, verify_records(7));
    const std::string verdict = compare(library, twin);
    std::printf(
        "AtLeastOnce NORMAL batch 7 with the position store on its own connection, "
        "against its twin: %s\n",
        verdict.c_str());
    return verdict == "same" && count_of(library, "2: INSERT INTO \"commit_order_positions\"") != 0;
  }();
  // The rare path: a position seeded behind the rows, so AtLeastOnce replays records whose rows
  // are already there. The guard keeps each row, the upsert changes nothing, and both must then
  // look the key up (a replay of its partition is absorbed; a key from another partition would
  // be key_moved_partition).
  const bool replay = [] {
    using library_t = pipeline_case<policy_id::at_least_once, sync_id::normal>;
    using twin_t = handwritten_case<policy_id::at_least_once, sync_id::normal>;
    constexpr std::int64_t replayed = 20;
    const auto library = statements_of<library_t>(7, verify_records(7), orders - replayed);
    const auto twin = statements_of<twin_t>(7, verify_records(7), orders - replayed);
    const std::string verdict = compare(library, twin);
    const std::size_t lookups = count_of(library, "1: SELECT \"source_partition\"");
    std::printf(
        "AtLeastOnce NORMAL batch 7 replaying %lld records (%zu key lookups after an upsert the "
        "guard kept), against its twin: %s\n",
        static_cast<long long>(replayed), lookups, verdict.c_str());
    return verdict == "same" && lookups == static_cast<std::size_t>(replayed);
  }();
  const bool caught[] = {
      flaw_is_caught<policy_id::at_least_once, flaw::commit_per_row>(
          "commits every row on its own"),
      flaw_is_caught<policy_id::transactional_position, flaw::position_first>(
          "stages the position before the rows"),
      flaw_is_caught<policy_id::transactional_position, flaw::plain_begin>(
          "begins with BEGIN, not BEGIN IMMEDIATE"),
      flaw_is_caught<policy_id::at_least_once, flaw::position_at_last>(
          "commits the last record's offset as the position"),
      flaw_is_caught<policy_id::transactional_position, flaw::no_read_back>(
          "does not read the pragmas back"),
      flaw_is_caught<policy_id::at_least_once, flaw::second_connection>(
          "writes the position on a connection of its own"),
  };
  sqlite3_reset_auto_extension();
  bool ok = reference && replay;
  for (const bool b : same)
    ok = ok && b;
  for (const bool b : caught)
    ok = ok && b;
  std::puts(ok ? "every hand-written twin executes the library's statements, and the check "
                 "tells a different twin apart"
               : "MISMATCH: a twin differs from the library, or the check missed a flaw");
  return ok;
}

// ---- --count: the callgrind driver -----------------------------------------------------------

template <class Case>
int count(std::size_t batch, std::size_t records) {
  instance<Case> c(batch);
  std::size_t done = 0;
  while (done < records) {
    const std::size_t n = c.c.step();
    if (n == 0) {
      std::fprintf(stderr, "--count: more records than one round holds (%lld)\n",
                   static_cast<long long>(round_records));
      return 2;
    }
    done += n;
  }
  return 0;
}

template <policy_id P, sync_id S>
int count_variant(const std::string& variant, std::size_t batch, std::size_t records) {
  if (variant == "pipeline")
    return count<pipeline_case<P, S>>(batch, records);
  if (variant == "handwritten")
    return count<handwritten_case<P, S>>(batch, records);
  if constexpr (P == policy_id::at_least_once) {
    if (variant == "pipeline_own_connection")
      return count<pipeline_case<P, S, true>>(batch, records);
  }
  std::fprintf(stderr, "unknown variant %s\n", variant.c_str());
  return 2;
}

template <policy_id P>
int count_sync(const std::string& variant, const std::string& sync, std::size_t batch,
               std::size_t records) {
  if (sync == "FULL")
    return count_variant<P, sync_id::full>(variant, batch, records);
  if (sync == "NORMAL")
    return count_variant<P, sync_id::normal>(variant, batch, records);
  std::fprintf(stderr, "unknown synchronous level %s\n", sync.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--verify") == 0)
    return verify() ? 0 : 1;
  if (argc == 7 && std::strcmp(argv[1], "--count") == 0) {
    const std::string variant = argv[2], policy = argv[3], sync = argv[4];
    const auto batch = static_cast<std::size_t>(std::strtoull(argv[5], nullptr, 10));
    const auto records = static_cast<std::size_t>(std::strtoull(argv[6], nullptr, 10));
    if (policy == "TransactionalPosition")
      return count_sync<policy_id::transactional_position>(variant, sync, batch, records);
    if (policy == "AtLeastOnce")
      return count_sync<policy_id::at_least_once>(variant, sync, batch, records);
    std::fprintf(stderr, "unknown policy %s\n", policy.c_str());
    return 2;
  }
  // --pairs=N (ours, taken out before Google Benchmark sees the flags): repetitions per case.
  int pairs = 15;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--pairs=", 8) == 0) {
      pairs = std::max(1, std::atoi(argv[i] + 8));
      for (int j = i; j + 1 < argc; ++j)
        argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  }
  register_pairs(pairs);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
