#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Compile time is part of a header-only template library's API. Measures, with g++ and
# clang++ at -O2 -std=c++20, the median of REPS (default 5) compilations of five translation
# units, and prints a Markdown section for docs/performance.md:
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
#   bench/compile_time.sh             prints the section
#   bench/compile_time.sh --write     also replaces it in docs/performance.md (between its
#                                     compile-time markers; the rest of the file is untouched)
# Environment: CXX_GNU (g++), CXX_CLANG (clang++), REPS (5), INCLUDE_DIR (this tree's include/:
# point it at another tree's headers to measure them with the same TUs), BASELINE_INCLUDE_DIR
# and BASELINE_LABEL (another tree's headers, measured in the same rounds, for a before/after
# column; e.g. `git archive <commit> include | tar -x -C /tmp/before`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
include_dir=${INCLUDE_DIR:-$root/include}
baseline_dir=${BASELINE_INCLUDE_DIR:-}
baseline_label=${BASELINE_LABEL:-baseline}
reps=${REPS:-5}
gxx=${CXX_GNU:-g++}
clangxx=${CXX_CLANG:-clang++}
write=0
[[ ${1:-} == --write ]] && write=1

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
# interleaved round by round. Prints one line per TU: "<tu> <wall> <cpu>"; with a baseline,
# also "baseline_<tu> <wall> <cpu>" for the TUs that include the library.
tus=(std_only umbrella kit_only pipelines handwritten)
library_tus=(umbrella kit_only pipelines)
compile_once() {  # compiler include-dir tu -> "wall cpu"
  local out wall user sys
  out=$( { TIMEFORMAT='%R %U %S'; time "$1" -std=c++20 -O2 -I"$2" -c "$work/$3.cpp" \
    -o "$work/$3.o"; } 2>&1 )
  read -r wall user sys <<<"$(tail -n1 <<<"$out")"
  echo "$wall $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')"
}
measure() {  # compiler
  local compiler=$1 i tu w c
  declare -A walls cpus
  for ((i = 0; i < reps; ++i)); do
    for tu in "${tus[@]}"; do
      read -r w c <<<"$(compile_once "$compiler" "$include_dir" "$tu")"
      walls[$tu]+="$w "
      cpus[$tu]+="$c "
    done
    if [[ -n $baseline_dir ]]; then
      for tu in "${library_tus[@]}"; do
        read -r w c <<<"$(compile_once "$compiler" "$baseline_dir" "$tu")"
        walls[baseline_$tu]+="$w "
        cpus[baseline_$tu]+="$c "
      done
    fi
  done
  for tu in "${!cpus[@]}"; do
    echo "$tu $(median ${walls[$tu]}) $(median ${cpus[$tu]})"
  done
}
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
verdict() { awk -v r="$1" 'BEGIN { print (r <= 1.5) ? "met" : "**not met**" }'; }

rows=""
verdicts=""
headers_met=1
for compiler in "$gxx" "$clangxx"; do
  name=$("$compiler" --version | head -n1)
  short=$(basename "$compiler")
  declare -A wall cpu
  while read -r tu w c; do
    wall[$tu]=$w
    cpu[$tu]=$c
  done < <(measure "$compiler")
  for tu in "${tus[@]}"; do
    row="| ${short} | ${tu} | ${wall[$tu]} | ${cpu[$tu]} | $(ratio "${cpu[$tu]}" "${cpu[std_only]}") |"
    if [[ -n $baseline_dir ]]; then
      if [[ -n ${cpu[baseline_$tu]:-} ]]; then
        row+=" ${cpu[baseline_$tu]} | $(ratio "${cpu[baseline_$tu]}" "${cpu[std_only]}") |"
      else
        row+=" | |"
      fi
    fi
    rows+="${row}
"
  done
  head_ratio=$(ratio "${cpu[umbrella]}" "${cpu[std_only]}")
  pipe_ratio=$(ratio "${cpu[pipelines]}" "${cpu[std_only]}")
  floor_ratio=$(ratio "${cpu[handwritten]}" "${cpu[std_only]}")
  over_floor=$(ratio "${cpu[pipelines]}" "${cpu[handwritten]}")
  [[ $(verdict "$head_ratio") == met ]] || headers_met=0
  loops=$(awk -v p="${cpu[pipelines]}" -v k="${cpu[kit_only]}" 'BEGIN { printf "%.2f", (p - k) / 3 }')
  verdicts+="- ${name}: the headers, umbrella / std_only = **${head_ratio}** (target <= 1.5: \
$(verdict "$head_ratio")); pipelines / std_only = **${pipe_ratio}** (target <= 1.5: \
$(verdict "$pipe_ratio")); handwritten / std_only = ${floor_ratio}; pipelines / handwritten = \
${over_floor}; one pipeline, (pipelines - kit_only) / 3 = ${loops} s"
  if [[ -n $baseline_dir ]]; then
    verdicts+="; ${baseline_label}: pipelines / std_only = $(ratio "${cpu[baseline_pipelines]}" "${cpu[std_only]}")"
  fi
  verdicts+=".
"
  unset wall cpu
done

header="| compiler | translation unit | wall s | CPU s | CPU / std_only |"
rule="|---|---|---:|---:|---:|"
if [[ -n $baseline_dir ]]; then
  header+=" ${baseline_label}: CPU s | ${baseline_label}: CPU / std_only |"
  rule+="---:|---:|"
fi

if ((headers_met)); then
  headers_sentence="**The headers** — what every TU that includes commit_order pays — meet it on
both compilers."
else
  headers_sentence="**The headers** — what every TU that includes commit_order pays — do not meet
it in this run (see the lines above)."
fi

section="<!-- compile-time: begin (bench/compile_time.sh --write; do not edit by hand) -->
## Compile time

Generated by \`bench/compile_time.sh\` (other sections of this file by
\`bench/performance_report.sh\`, which keeps this one as it is). A header-only template library
is paid for at every compilation, so its compile time is measured like its run time. Five
translation units, each compiled ${reps} times with \`-std=c++20 -O2 -c\`, interleaved round by
round; the figures are medians, the ratios of CPU time (user + system), which other processes on
a shared machine disturb less than wall-clock time:

- \`std_only\`: \`<vector>\`, \`<map>\`, \`<string>\` and a \`main\` that puts one element in a
  \`std::map<std::string, std::vector<int>>\` — what a TU of any C++ program pays;
- \`umbrella\`: \`#include <commit_order/commit_order.hpp>\` and nothing else;
- \`kit_only\`: the headers and testing-kit parts of \`pipelines\` (the log, the three tables,
  the stores) driven by a loop of its own, with no pipeline;
- \`pipelines\`: the umbrella and the testing kit, and one pipeline per policy (\`AtMostOnce\`,
  \`AtLeastOnce\`, \`TransactionalPosition\`) over \`memory::log\` readers, \`memory::table\`s and
  a \`memory::position_store\`, each constructed and run;
- \`handwritten\`: the same three consumers written by hand over the same kind of parts (a
  vector log, a map table with an undo log, the same loops and the same kind of errors), with no
  commit_order header: the floor for the work \`pipelines\` does.

${header}
${rule}
${rows}
${verdicts}
Issue 9 asks for at most 1.5x \`std_only\`. ${headers_sentence} **The pipelines TU does not, and cannot as written**: the
hand-written consumers alone cost more than 1.5x, because \`std_only\` instantiates and
optimises no map-backed table, undo log or error path. Of what the pipelines TU costs above the
headers, the testing kit's parts take about half (\`kit_only\`) and the three pipelines the rest
(their loops, recovery and error paths, and the rule checks: 49 predicates per configuration);
the last figure of each line above is one pipeline's share.

Taken out of the headers for issue 9: \`<ostream>\` (offset.hpp includes \`<iosfwd>\`),
\`<functional>\` (the executor concept checks a task archetype), \`<ranges>\` (the source
concepts use only ranges::begin, end and size and the iterator concepts), and with libstdc++ 12
the calendar and I/O of \`<chrono>\` and the stream iterators of \`<iterator>\`
(\`commit_order/detail/chrono.hpp\` and \`detail/iterator.hpp\`: the core names only
\`milliseconds\`, \`steady_clock\`, the range access objects and the iterator concepts, which
libstdc++ 12 has in \`<bits/chrono.h>\` and \`<span>\`; the full headers bring \`<sstream>\`,
\`<streambuf>\` and the locale machinery, and leaving them out took the umbrella TU from 0.52
to 0.46 s of CPU on g++ 12 and from 0.60 to 0.46 s on clang++ 14 in the runs made for the
change; other standard libraries, or \`COMMIT_ORDER_STANDARD_HEADERS_ONLY\`, get the standard
headers), the error messages' concatenations (one cold,
out-of-line function instead of one in every constructor of every TU), Boost.Hana's algorithms
in the capability queries (plain pack expansions), and the executor path: \`with_executor\`'s
machinery (\`detail/async_path.hpp\`, \`detail/async_writes.hpp\` with \`<mutex>\`,
\`<condition_variable>\` and \`<memory>\`, \`completion_tracker.hpp\` with \`<deque>\`) is reached
through \`commit_order/executor.hpp\`. Of the pipelines TU, clang's
\`-ftime-trace\` puts about 40% in code generation and optimisation: the loops, the tables'
maps, and the recovery and error paths, which a hand-written consumer that never recovers
does not have.
<!-- compile-time: end -->"

echo "$section"
if ((write)); then
  doc=docs/performance.md
  if grep -q '^<!-- compile-time: begin' "$doc"; then
    # Replace the old section, keep everything around it.
    awk -v section="$section" '
      /^<!-- compile-time: begin/ { print section; skipping = 1; next }
      /^<!-- compile-time: end -->/ { skipping = 0; next }
      !skipping { print }' "$doc" > "$work/performance.md"
  else
    { cat "$doc"; echo; echo "$section"; } > "$work/performance.md"
  fi
  cp "$work/performance.md" "$doc"
  echo "compile_time: wrote the compile-time section of $doc" >&2
fi
