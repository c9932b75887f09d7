// SPDX-License-Identifier: BSL-1.0
// Per-record overhead of `pipeline` against the hand-written loop doing the same steps and
// against the raw sink alone, for each policy at batch 1, 64 and 512 — measured side by side in
// one run. A pipeline case is named `pipeline/<Policy>/batch:<B>`; its twin differs only by the
// word: `handwritten/<Policy>/batch:<B>` (and `raw_sink/...` for the floor).
//
// Two builds of the same cases (bench/CMakeLists.txt):
//   overhead_bench        every loop in this one translation unit, beside the harness;
//   overhead_split_bench  each variant's loop in a translation unit of its own
//                         (COMMIT_ORDER_OVERHEAD_SPLIT), with a fourth variant,
//                         `handwritten_ref/...`: the twin reaching its parts through pointers.
// overhead_loops.hpp says why both: g++'s inliner decides per translation unit.
//
//   overhead_bench [benchmark flags]     run, then print the ratio table of medians
//   overhead_bench --verify              check each pipeline and its twin leave the same state
//   overhead_bench --count V P B N       run variant V of policy P at batch B for N records
//                                        (the callgrind driver, see bench/callgrind_report.sh)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "overhead_cases.hpp"
#if !defined(COMMIT_ORDER_OVERHEAD_SPLIT)
#include "overhead_loops.hpp"  // the loops, instantiated here, in this translation unit
#endif

namespace {

using namespace overhead;

#if defined(COMMIT_ORDER_OVERHEAD_SPLIT)
constexpr bool split_build = true;
#else
constexpr bool split_build = false;
#endif

template <template <class> class Case, class Policy>
void run_case(benchmark::State& state, std::size_t batch) {
  Case<Policy> c(batch);
  std::size_t records = 0;
  for (auto _ : state) {
    std::size_t n = c.step();
    if (n == 0) {  // end of the round: start over on a fresh table
      state.PauseTiming();
      c.reset();
      state.ResumeTiming();
      n = c.step();
    }
    records += n;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(records));
  state.counters["ns_per_record"] = benchmark::Counter(
      static_cast<double>(records), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <class Policy>
void register_policy() {
  for (const std::size_t batch : {std::size_t{1}, std::size_t{64}, std::size_t{512}}) {
    const std::string suffix =
        std::string("/") + policy_traits<Policy>::name + "/batch:" + std::to_string(batch);
    benchmark::RegisterBenchmark(("pipeline" + suffix).c_str(), [batch](benchmark::State& s) {
      run_case<pipeline_case, Policy>(s, batch);
    });
    benchmark::RegisterBenchmark(("handwritten" + suffix).c_str(), [batch](benchmark::State& s) {
      run_case<handwritten_case, Policy>(s, batch);
    });
    if constexpr (split_build) {
      benchmark::RegisterBenchmark(
          ("handwritten_ref" + suffix).c_str(),
          [batch](benchmark::State& s) { run_case<handwritten_ref_case, Policy>(s, batch); });
    }
    benchmark::RegisterBenchmark(("raw_sink" + suffix).c_str(), [batch](benchmark::State& s) {
      run_case<raw_sink_case, Policy>(s, batch);
    });
  }
}

/// Prints the usual console output, then a table of median-time ratios per case.
class ratio_reporter final : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (!median && !single)
        continue;
      const std::string name = r.run_name.str();
      const auto slash = name.find('/');
      const std::string variant = name.substr(0, slash);
      const std::string rest = name.substr(slash + 1);
      const auto per_record = r.counters.find("ns_per_record");
      if (per_record == r.counters.end())
        continue;
      table_[rest][variant] = per_record->second.value * 1e9;
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    // The split build adds the referenced twin's two columns before the target (the report
    // scripts read the first six).
    std::printf("\n%-36s %12s %12s %12s %10s %10s", "case (median ns/record)", "pipeline",
                "handwritten", "raw_sink", "pipe/hand", "pipe/raw");
    if (split_build)
      std::printf(" %12s %10s", "hand_ref", "pipe/ref");
    std::printf("  %s\n", "target");
    for (const auto& [name, v] : table_) {
      const double p = value(v, "pipeline"), h = value(v, "handwritten"), s = value(v, "raw_sink");
      // The targets: at most 1.05x the hand-written loop at batch 1, 1.02x at batch 512.
      const char* target = "";
      if (name.ends_with("batch:1"))
        target = p / h <= 1.05 ? "<= 1.05: met" : "<= 1.05: MISSED";
      if (name.ends_with("batch:512"))
        target = p / h <= 1.02 ? "<= 1.02: met" : "<= 1.02: MISSED";
      std::printf("%-36s %12.2f %12.2f %12.2f %10.3f %10.3f", name.c_str(), p, h, s, p / h, p / s);
      if (split_build) {
        const double r = value(v, "handwritten_ref");
        std::printf(" %12.2f %10.3f", r, p / r);
      }
      std::printf("  %s\n", target);
    }
  }

 private:
  static double value(const std::map<std::string, double>& m, const char* k) {
    const auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  }
  std::map<std::string, std::map<std::string, double>> table_;
};

template <class Policy>
bool verify_policy() {
  bool ok = true;
  for (const std::size_t batch :
       {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{512}}) {
    pipeline_case<Policy> p(batch);
    handwritten_case<Policy> h(batch);
    while (p.step() != 0) {
    }
    while (h.step() != 0) {
    }
    const bool same_rows = snapshot(p.f.table) == snapshot(h.f.table);
    bool same_position = false;
    if constexpr (std::is_same_v<Policy, co::TransactionalPosition<>>) {
      same_position = p.f.table.load_position() == h.f.table.load_position() &&
                      p.f.table.load_position() == co::position{log_size};
    } else {
      same_position = p.f.st.load() == h.f.st.load() && p.f.st.load() == co::position{log_size} &&
                      p.f.st.commits() == h.f.st.commits();
    }
    std::printf("%-22s batch %-4zu rows %s, position %s\n", policy_traits<Policy>::name, batch,
                same_rows ? "same" : "DIFFERENT", same_position ? "same" : "DIFFERENT");
    ok = ok && same_rows && same_position && p.f.table.size() != 0;
    if constexpr (split_build) {
      // The referenced twin is the owned one reaching its parts through pointers: same work.
      handwritten_ref_case<Policy> r(batch);
      while (r.step() != 0) {
      }
      bool ref_same = snapshot(r.f.table) == snapshot(h.f.table);
      if constexpr (std::is_same_v<Policy, co::TransactionalPosition<>>) {
        ref_same = ref_same && r.f.table.load_position() == h.f.table.load_position();
      } else {
        ref_same =
            ref_same && r.f.st.load() == h.f.st.load() && r.f.st.commits() == h.f.st.commits();
      }
      std::printf("%-22s batch %-4zu the referenced twin: %s\n", policy_traits<Policy>::name, batch,
                  ref_same ? "same" : "DIFFERENT");
      ok = ok && ref_same;
    }
  }
  return ok;
}

template <template <class> class Case, class Policy>
int count(std::size_t batch, std::size_t records) {
  Case<Policy> c(batch);
  std::size_t done = 0;
  while (done < records) {
    const std::size_t n = c.step();
    if (n == 0) {
      std::fprintf(stderr, "--count: more records than one round holds (%lld)\n",
                   static_cast<long long>(log_size));
      return 2;
    }
    done += n;
  }
  benchmark::DoNotOptimize(c.f.table.size());
  return 0;
}

template <class Policy>
int count_variant(const std::string& variant, std::size_t batch, std::size_t records) {
  if (variant == "pipeline")
    return count<pipeline_case, Policy>(batch, records);
  if (variant == "handwritten")
    return count<handwritten_case, Policy>(batch, records);
  if constexpr (split_build) {
    if (variant == "handwritten_ref")
      return count<handwritten_ref_case, Policy>(batch, records);
  }
  if (variant == "raw_sink")
    return count<raw_sink_case, Policy>(batch, records);
  std::fprintf(stderr, "unknown variant %s\n", variant.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--verify") == 0) {
    // Every policy runs and reports, even after a mismatch.
    const bool amo = verify_policy<co::AtMostOnce<>>();
    const bool alo = verify_policy<co::AtLeastOnce<>>();
    const bool tx = verify_policy<co::TransactionalPosition<>>();
    const bool ok = amo && alo && tx;
    std::puts(ok ? "every pipeline case leaves the state its hand-written twin leaves"
                 : "MISMATCH between a pipeline and its hand-written twin");
    return ok ? 0 : 1;
  }
  if (argc == 6 && std::strcmp(argv[1], "--count") == 0) {
    const std::string variant = argv[2], policy = argv[3];
    const auto batch = static_cast<std::size_t>(std::strtoull(argv[4], nullptr, 10));
    const auto records = static_cast<std::size_t>(std::strtoull(argv[5], nullptr, 10));
    if (policy == "AtMostOnce")
      return count_variant<co::AtMostOnce<>>(variant, batch, records);
    if (policy == "AtLeastOnce")
      return count_variant<co::AtLeastOnce<>>(variant, batch, records);
    if (policy == "TransactionalPosition") {
      return count_variant<co::TransactionalPosition<>>(variant, batch, records);
    }
    std::fprintf(stderr, "unknown policy %s\n", policy.c_str());
    return 2;
  }
  register_policy<co::AtMostOnce<>>();
  register_policy<co::AtLeastOnce<>>();
  register_policy<co::TransactionalPosition<>>();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
