#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Compile time is part of a header-only template library's API. Measures, with g++ and
# clang++ at -O2 -std=c++20, the median of REPS (default 5) compilations of five translation
# units, and prints the compile-time tables of docs/performance.md:
#   std_only   <vector>, <map> and <string>: what any TU of a C++ program pays anyway;
#   umbrella   #include <commit_order/commit_order.hpp> and nothing else;
#   kit_only   the pipelines TU's headers and testing-kit parts (log, tables, stores), driven by
#              hand with no pipeline: pipelines - kit_only is what the pipelines themselves cost;
#   pipelines  the umbrella and the testing kit, one pipeline per policy over the memory parts,
#              each constructed and run (so the loop is instantiated and code-generated);
#   handwritten the same three consumers written by hand over the same kind of parts, no
#              library: what the pipelines TU cannot go below, whatever the headers do.
# Issue 9 asks for at most 1.5x std_only; both readings are reported: the headers alone
# (umbrella / std_only) and the pipelines TU (pipelines / std_only).
# The compilations are interleaved (one of each TU per round), so a change in the machine's load
# during the run weighs on every TU alike.
#
#   bench/compile_time.sh             prints the tables
#   bench/compile_time.sh --write     also keeps the figures in docs/data/compile-time*.tsv and
#                                     puts the tables in docs/performance.md between their
#                                     markers (the rest of the file is untouched)
# REUSE=1 measures nothing: the tables are made from docs/data/compile-time*.tsv.
# Environment: CXX_GNU (g++), CXX_CLANG (clang++), REPS (5), INCLUDE_DIR (this tree's include/:
# point it at another tree's headers to measure them with the same TUs), BASELINE_INCLUDE_DIR
# and BASELINE_LABEL (another tree's headers, measured in the same rounds, for a before/after
# column; e.g. `git archive <commit> include | tar -x -C /tmp/before`).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/report_lib.sh
source bench/report_lib.sh
include_dir=${INCLUDE_DIR:-$PWD/include}
baseline_dir=${BASELINE_INCLUDE_DIR:-}
baseline_label=${BASELINE_LABEL:-baseline}
reps=${REPS:-5}
gxx=${CXX_GNU:-g++}
clangxx=${CXX_CLANG:-clang++}
write=0
[[ ${1:-} == --write ]] && write=1
data=$perf_data/compile-time.tsv
run=$perf_data/compile-time-run.tsv

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/std_only.cpp" <<'CPP'
#include <map>
#include <string>
#include <vector>

int main() {
  std::map<std::string, std::vector<int>> m;
  m["a"].push_back(1);
  return static_cast<int>(m.size()) - 1;
}
CPP

cat > "$work/umbrella.cpp" <<'CPP'
#include <commit_order/commit_order.hpp>

int main() { return 0; }
CPP

cat > "$work/pipelines.cpp" <<'CPP'
#include <cstdint>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace co = commit_order;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};
using order_key = co::key<&order_event::order_id>;
using order_log = co::memory::log<order_event>;
using store = co::memory::position_store<co::Volatile>;
using append_table = co::memory::table<order_event, co::no_key, co::capabilities<>>;
using guarded_table =
    co::memory::table<order_event, order_key, co::capabilities<co::Idempotent, co::OffsetGuarded>>;
using tx_table =
    co::memory::table<order_event, order_key,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>;

int main() {
  order_log log;
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(order_event{i % 3, i});
  auto r1 = log.make_reader();
  auto r2 = log.make_reader();
  auto r3 = log.make_reader();
  using reader = order_log::reader;

  append_table appended;
  store s1;
  co::pipeline<reader, append_table, co::AtMostOnce<>, co::with_store<store>> p1(r1, appended, s1);
  guarded_table guarded;
  store s2;
  co::pipeline<reader, guarded_table, co::AtLeastOnce<>, co::with_store<store>> p2(r2, guarded, s2);
  tx_table transactional;
  co::pipeline<reader, tx_table, co::TransactionalPosition<>> p3(r3, transactional);

  const auto n = p1.run() + p2.run() + p3.run();
  return n == 30 ? 0 : 1;
}
CPP

# The testing kit's parts of pipelines.cpp driven by hand, with no pipeline: what the pipelines
# TU costs before any pipeline is instantiated. pipelines - kit_only is the library's loop.
{
  sed -n '1,/^int main/p' "$work/pipelines.cpp" | sed '$d'
  cat <<'CPP'
// The same parts driven by hand: what the testing kit costs without any pipeline.
template <class Table>
std::size_t drain(order_log::reader& r, Table& t, bool tx) {
  std::size_t n = 0;
  r.seek(r.earliest());
  for (;;) {
    auto batch = r.poll(8);
    if (batch.empty())
      return n;
    if (tx) {
      if constexpr (co::has_capability_v<Table, co::Transactional>) {
        t.begin();
        for (const auto& rec : batch)
          t.apply(rec.source_offset, rec.event);
        t.store_position(co::position::after(batch.back().source_offset));
        t.commit();
      }
    } else {
      for (const auto& rec : batch)
        t.apply(rec.source_offset, rec.event);
    }
    n += batch.size();
  }
}
int main() {
  order_log log;
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(order_event{i % 3, i});
  auto r1 = log.make_reader();
  auto r2 = log.make_reader();
  auto r3 = log.make_reader();
  append_table appended;
  store s1, s2;
  guarded_table guarded;
  tx_table transactional;
  auto n = drain(r1, appended, false);
  s1.commit(r1.end());
  n += drain(r2, guarded, false);
  s2.commit(r2.end());
  n += drain(r3, transactional, true);
  return n == 30 && s1.load() && transactional.load_position() ? 0 : 1;
}
CPP
} > "$work/kit_only.cpp"

cat > "$work/handwritten.cpp" <<'CPP'
// The three consumers of pipelines.cpp, written by hand: a log, an append table, a guarded
// keyed table with transactions and a position store, the same loops in the same step orders,
// the same kind of errors thrown. No commit_order header.
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};
struct record {
  std::int64_t offset;
  order_event event;
};
struct order_log {
  std::vector<record> records;
  std::int64_t read = 0;
  std::span<const record> poll(std::size_t n) {
    if (read < 0)
      throw std::runtime_error("position lost at " + std::to_string(read));
    const auto first = static_cast<std::size_t>(read);
    const auto count = std::min(n, records.size() - first);
    read += static_cast<std::int64_t>(count);
    return std::span<const record>(records).subspan(first, count);
  }
};
struct store {
  std::optional<std::int64_t> position;
  void commit(std::int64_t p) { position = p; }
};
struct append_table {
  std::vector<std::pair<order_event, std::int64_t>> rows;
  void apply(std::int64_t o, const order_event& e) { rows.push_back({e, o}); }
};
struct guarded_table {
  using row = std::pair<order_event, std::int64_t>;
  std::map<std::int64_t, row> rows;
  std::vector<std::pair<std::int64_t, std::optional<row>>> undo;
  std::optional<std::int64_t> position, staged;
  bool in_tx = false;
  bool apply(std::int64_t o, const order_event& e) {
    auto it = rows.find(e.order_id);
    if (it != rows.end() && !(it->second.second < o))
      return false;
    if (in_tx)
      undo.push_back({e.order_id, it == rows.end() ? std::nullopt : std::optional{it->second}});
    if (it == rows.end())
      rows.emplace(e.order_id, row{e, o});
    else
      it->second = row{e, o};
    return true;
  }
  void begin() {
    if (in_tx)
      throw std::logic_error("begin() inside an open transaction");
    in_tx = true;
    undo.clear();
  }
  void commit() {
    if (staged)
      position = staged;
    in_tx = false;
    undo.clear();
  }
  void rollback() {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      if (it->second)
        rows.insert_or_assign(it->first, *it->second);
      else
        rows.erase(it->first);
    }
    in_tx = false;
  }
};
template <class Unit>
std::size_t run(order_log& log, Unit&& unit) {
  std::size_t total = 0;
  for (;;) {
    const auto batch = log.poll(500);
    if (batch.empty())
      return total;
    unit(batch);
    total += batch.size();
  }
}

int main() {
  order_log l1;
  for (std::int64_t i = 0; i < 10; ++i)
    l1.records.push_back({i, {i % 3, i}});
  order_log l2 = l1, l3 = l1;
  append_table appended;
  store s1, s2;
  guarded_table guarded, transactional;
  auto n = run(l1, [&](auto b) {  // AtMostOnce: commit, then write
    s1.commit(b.back().offset + 1);
    for (const auto& r : b)
      appended.apply(r.offset, r.event);
  });
  n += run(l2, [&](auto b) {  // AtLeastOnce: write, then commit
    for (const auto& r : b) {
      try {
        guarded.apply(r.offset, r.event);
      } catch (const std::exception& e) {
        throw std::runtime_error("record " + std::to_string(r.offset) + " failed: " + e.what());
      }
    }
    s2.commit(b.back().offset + 1);
  });
  n += run(l3, [&](auto b) {  // TransactionalPosition: begin, write, store, commit
    transactional.begin();
    try {
      for (const auto& r : b)
        transactional.apply(r.offset, r.event);
      transactional.staged = b.back().offset + 1;
      transactional.commit();
    } catch (...) {
      transactional.rollback();
      throw;
    }
  });
  return n == 30 ? 0 : 1;
}
CPP

# Median wall-clock and CPU (user + sys) seconds of `reps` compilations of each TU, the TUs
# interleaved round by round: compile-time.tsv's lines, the baseline's headers (if any) in the
# same rounds.
tus=(std_only umbrella kit_only pipelines handwritten)
library_tus=(umbrella kit_only pipelines)
compile_once() {  # compiler include-dir tu -> "wall cpu"
  local out wall user sys
  out=$( { TIMEFORMAT='%R %U %S'; time "$1" -std=c++20 -O2 -I"$2" -c "$work/$3.cpp" \
    -o "$work/$3.o"; } 2>&1 )
  read -r wall user sys <<<"$(tail -n1 <<<"$out")"
  echo "$wall $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')"
}
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
measure() {  # compiler
  local compiler=$1 version i tu w c key
  local -A walls cpus
  version=$("$compiler" --version | head -n1)
  for ((i = 0; i < reps; ++i)); do
    for tu in "${tus[@]}"; do
      read -r w c <<<"$(compile_once "$compiler" "$include_dir" "$tu")"
      walls[tree/$tu]+="$w "
      cpus[tree/$tu]+="$c "
    done
    if [[ -n $baseline_dir ]]; then
      for tu in "${library_tus[@]}"; do
        read -r w c <<<"$(compile_once "$compiler" "$baseline_dir" "$tu")"
        walls[$baseline_label/$tu]+="$w "
        cpus[$baseline_label/$tu]+="$c "
      done
    fi
  done
  local keys=("${tus[@]/#/tree/}")
  [[ -n $baseline_dir ]] && keys+=("${library_tus[@]/#/$baseline_label/}")
  for key in "${keys[@]}"; do
    # shellcheck disable=SC2086 # the lists are words
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$compiler")" "$version" "${key%%/*}" "${key#*/}" \
      "$(median ${walls[$key]})" "$(median ${cpus[$key]})"
  done
}

if [[ $reuse != 1 ]]; then
  data=$work/compile-time.tsv
  run=$work/compile-time-run.tsv
  {
    printf 'measured\t%s\n' "$(now)"
    printf 'machine\t%s\n' "$(machine)"
    printf 'load average at the start\t%s\n' "$(load_average)"
    printf 'commit\t%s\n' "$(git rev-parse --short HEAD)"
    printf 'compilations\t%s of each TU per compiler, -std=c++20 -O2 -c\n' "$reps"
  } >"$run"
  printf 'compiler\tversion\theaders\ttu\twall_s\tcpu_s\n' >"$data"
  measure "$gxx" >>"$data"
  measure "$clangxx" >>"$data"
  if ((write)); then
    mkdir -p "$perf_data"
    cp "$data" "$perf_data/compile-time.tsv"
    cp "$run" "$perf_data/compile-time-run.tsv"
  fi
fi
need_data "$data" "$run"

# Per compiler, each TU's medians and CPU time against std_only's; with a baseline, its CPU time
# beside.
tu_table() {
  awk -F'\t' -v tus="${tus[*]}" '
    NR > 1 { if (!($1 in seen)) { seen[$1] = 1; cc[n++] = $1 }
      if ($3 == "tree") { wall[$1, $4] = $5; cpu[$1, $4] = $6 } else { base[$1, $4] = $6; label = $3 } }
    END {
      nt = split(tus, tu, " ")
      head = "compiler\ttranslation unit\twall s\tCPU s\tCPU / std_only"
      if (label != "") head = head "\t" label ": CPU s\t" label ": CPU / std_only"
      print head
      for (i = 0; i < n; ++i) for (j = 1; j <= nt; ++j) {
        c = cc[i]; t = tu[j]
        row = sprintf("%s\t%s\t%s\t%s\t%.2f", c, t, wall[c, t], cpu[c, t], cpu[c, t] / cpu[c, "std_only"])
        if (label != "")
          row = row ((c, t) in base ? sprintf("\t%s\t%.2f", base[c, t], base[c, t] / cpu[c, "std_only"]) : "\t\t")
        print row
      }
    }' "$data" | md_table llrrrrr
}
# Per compiler, the ratios issue 9's target is read from.
ratio_table() {
  awk -F'\t' '
    NR > 1 { if (!($1 in seen)) { seen[$1] = 1; cc[n++] = $1; version[$1] = $2 }
      if ($3 == "tree") cpu[$1, $4] = $6; else { base[$1, $4] = $6; label = $3 } }
    function verdict(r) { return r + 0 <= 1.5 ? "met" : "**not met**" }
    END {
      head = "compiler\tumbrella / std_only\ttarget <= 1.5\tpipelines / std_only\ttarget <= 1.5\t" \
        "handwritten / std_only\tpipelines / handwritten\tone pipeline, (pipelines - kit_only) / 3, s"
      if (label != "") head = head "\t" label ": pipelines / std_only"
      print head
      for (i = 0; i < n; ++i) {
        c = cc[i]; s = cpu[c, "std_only"]
        h = sprintf("%.2f", cpu[c, "umbrella"] / s); p = sprintf("%.2f", cpu[c, "pipelines"] / s)
        row = sprintf("%s\t**%s**\t%s\t**%s**\t%s\t%.2f\t%.2f\t%.2f", version[c], h, verdict(h), p,
          verdict(p), cpu[c, "handwritten"] / s, cpu[c, "pipelines"] / cpu[c, "handwritten"],
          (cpu[c, "pipelines"] - cpu[c, "kit_only"]) / 3)
        if (label != "") row = row sprintf("\t%.2f", base[c, "pipelines"] / s)
        print row
      }
    }' "$data" | md_table lrlrlrrrr
}

if ((write)); then
  run_table "$run" | put_table compile-time-run
  tu_table | put_table compile-time
  ratio_table | put_table compile-time-ratios
  echo "compile_time: wrote the compile-time tables of $perf_doc" >&2
else
  run_table "$run"
  echo
  tu_table
  echo
  ratio_table
fi
