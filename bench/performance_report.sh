#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Measures and writes the tables of docs/performance.md (the prose around them is written by
# hand): the in-memory tables (bench/overhead.cpp: wall clock at three code layouts on both
# compilers, callgrind instructions per record), the SQLite tables (bench/sqlite_report.sh), the
# Kafka tables (bench/kafka.cpp's interleaved comparison, on the mock cluster and on a broker),
# the PostgreSQL tables (bench/postgres_report.sh) and the Kafka Connect tables
# (bench/peer/report.sh). The compile-time tables are bench/compile_time.sh's.
#
#   cmake --preset bench && cmake --build --preset bench &&
#   cmake --build --preset bench --target kafka_bench &&
#   cmake --preset bench-clang && cmake --build --preset bench-clang &&
#   cmake --build --preset bench --target postgres_bench &&
#   bench/performance_report.sh [all|memory|sqlite|kafka|postgres|peer]
#
# A suite's figures are kept in docs/data/ (docs/data/README.md); REUSE=1 writes its tables and
# charts from them again without measuring.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=bench/report_lib.sh
source bench/report_lib.sh
what=${1:-all}
[[ $what =~ ^(all|memory|sqlite|kafka|postgres|peer)$ ]] || {
  echo "usage: bench/performance_report.sh [all|memory|sqlite|kafka|postgres|peer]" >&2
  exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- in memory ----------------------------------------------------------------------------------
# docs/data/overhead-wall.tsv: per compiler, code layout and case, the benchmark's median ns per
# record of each variant and its two ratios; overhead-reruns.tsv: the rows whose median over the
# layouts missed the target, run three times more; overhead-callgrind.tsv and
# overhead-batch1.tsv: bench/callgrind_report.sh's figures for both builds.
reps=${REPETITIONS:-15}
wall=$perf_data/overhead-wall.tsv
reruns=$perf_data/overhead-reruns.tsv
callgrind=$perf_data/overhead-callgrind.tsv
batch1=$perf_data/overhead-batch1.tsv
memory_run=$perf_data/overhead-run.tsv
# Code layout: at equal instruction counts a wall-clock ratio of a few percent can be decided by
# where the linker puts the loops, so each compiler's benchmark is built at two more alignments.
layout_flags=("-falign-loops=32" "-falign-functions=64 -falign-loops=64")

run_overhead() {  # binary [benchmark flags] -> its median table's case rows
  "$@" --benchmark_repetitions="$reps" --benchmark_min_time=0.2 \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
    --benchmark_color=false 2>/dev/null | sed -n '/^case (median ns\/record)/,$p' |
    awk '$1 ~ /\/batch:/'
}
wall_rows() {  # compiler layout < case rows -> overhead-wall.tsv rows, by policy and batch
  awk -v c="$1" -v l="$2" 'BEGIN { OFS = "\t" }
    { p = $1 ~ /^AtMostOnce/ ? 1 : $1 ~ /^AtLeastOnce/ ? 2 : 3; b = $1; sub(/.*batch:/, "", b)
      print p * 1000 + b, c, l, $1, $2, $3, $4, $5, $6 }
    END { if (NR == 0) { print "performance_report: no median table from the benchmark" > "/dev/stderr"; exit 1 } }' |
    sort -n | cut -f2-
}
layout_compile() {  # build dir -> the build's own compile command for overhead.cpp, no -o/-c
  jq -r '.[] | select(.file | endswith("/bench/overhead.cpp"))
      | select(.command | contains("/overhead_bench.dir/")) | .command' \
    "$1/compile_commands.json" | sed -E 's/ -o [^ ]+ -c [^ ]+$//'
}
# Per compiler and case: the median of the layouts' pipeline / handwritten, and whether it meets
# the target (at most 1.05 at batch 1, 1.02 at batch 512). overhead-wall.tsv -> "compiler case
# median verdict" lines.
layout_medians() {
  awk -F'\t' 'NR > 1 { k = $1 "\t" $3; v[k] = v[k] " " $7; if (!(k in seen)) { seen[k] = 1; o[n++] = k } }
    END {
      for (i = 0; i < n; ++i) {
        m = split(v[o[i]], x, " ")
        for (a = 1; a <= m; ++a) for (b = a + 1; b <= m; ++b) if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
        med = x[int((m + 1) / 2)]
        limit = o[i] ~ /batch:1$/ ? 1.05 : (o[i] ~ /batch:512$/ ? 1.02 : 0)
        verdict = limit == 0 ? "" : (med <= limit ? "<= " limit ": met" : "<= " limit ": **MISSED**")
        printf "%s\t%.3f\t%s\n", o[i], med, verdict
      }
    }' "$1"
}

memory_measure() {
  local -A builds=([gcc]=build/bench [clang]=build/bench-clang)
  local c b
  for b in "${builds[@]}"; do
    [[ -x $b/bench/overhead_bench && -x $b/bench/overhead_split_bench ]] || {
      echo "performance_report: build overhead_bench and overhead_split_bench in the bench and bench-clang presets" >&2
      exit 1
    }
  done
  command -v jq >/dev/null || { echo "performance_report: needs jq (apt-get install jq)" >&2; exit 1; }
  {
    printf 'measured\t%s\n' "$(now)"
    printf 'machine\t%s\n' "$(machine)"
    printf 'load average at the start\t%s\n' "$(load_average)"
    printf 'compilers\t%s; %s\n' "$("$(layout_compile build/bench | cut -d' ' -f1)" --version | head -n1)" \
      "$("$(layout_compile build/bench-clang | cut -d' ' -f1)" --version | head -n1)"
    printf 'build\tthe bench and bench-clang presets (Release, -O3)\n'
    printf 'commit\t%s\n' "$(git rev-parse --short HEAD)"
    printf 'wall clock\tthe median of %s repetitions with random interleaving, in one run\n' "$reps"
    printf 'callgrind\tover %s and %s records, the difference per record\n' "${N1:-8192}" "${N2:-24576}"
  } >"$tmp/overhead-run.tsv"
  printf 'compiler\tlayout\tcase\tpipeline_ns\thandwritten_ns\traw_sink_ns\tpipe_hand\tpipe_raw\n' \
    >"$tmp/wall.tsv"
  for c in gcc clang; do
    run_overhead "${builds[$c]}/bench/overhead_bench" | wall_rows "$c" default >>"$tmp/wall.tsv"
  done

  local bin opts
  printf 'compiler\tbuild\tpolicy\tbatch\tpipeline\thandwritten\traw_sink\thandwritten_ref\n' \
    >"$tmp/callgrind.tsv"
  for c in gcc clang; do
    for bin in overhead_bench overhead_split_bench; do
      opts=()
      [[ $bin == overhead_split_bench ]] && opts=(--with-ref)
      bench/callgrind_report.sh "${builds[$c]}/bench/$bin" "${opts[@]}" >"$tmp/instr.tsv"
      awk -F'\t' -v c="$c" -v b="$bin" 'BEGIN { OFS = "\t" }
        NR > 1 { print c, b, $1, $2, $3, $4, $5, (NF > 5 ? $6 : "") }' "$tmp/instr.tsv" \
        >>"$tmp/callgrind.tsv"
    done
  done
  # Batch 1: the data reads and writes behind the instruction counts (g++ 12, both builds).
  printf 'build\tpolicy\tvariant\tinstructions\tdata_reads\tdata_writes\n' >"$tmp/batch1.tsv"
  for bin in overhead_bench overhead_split_bench; do
    bench/callgrind_report.sh "build/bench/bench/$bin" --batch1-data >"$tmp/instr.tsv"
    awk -v b="$bin" 'NR > 1 { print b "\t" $0 }' "$tmp/instr.tsv" >>"$tmp/batch1.tsv"
  done

  # The same sources built at the other layouts, each run like the default one.
  local compile compiler flags
  for c in gcc clang; do
    compile=$(layout_compile "${builds[$c]}")
    compiler=${compile%% *}
    for flags in "${layout_flags[@]}"; do
      # shellcheck disable=SC2086 # the compile command and the flags are words to split
      (cd "${builds[$c]}" && $compile $flags -c "$root/bench/overhead.cpp" -o "$tmp/overhead_layout.o")
      "$compiler" "$tmp/overhead_layout.o" -o "$tmp/overhead_layout" -lbenchmark -lpthread
      run_overhead "$tmp/overhead_layout" | wall_rows "$c" "$flags" >>"$tmp/wall.tsv"
    done
  done
  # Each row whose median over the layouts misses its target, run three times more by the
  # default layout's binary: how far one binary's own runs move that ratio.
  local case_ verdict runs
  printf 'compiler\tcase\trun_1\trun_2\trun_3\n' >"$tmp/reruns.tsv"
  while IFS=$'\t' read -r c case_ _ verdict; do
    [[ $verdict == *MISSED* ]] || continue
    runs=""
    for _ in 1 2 3; do
      runs+=$'\t'$(run_overhead "${builds[$c]}/bench/overhead_bench" \
        --benchmark_filter="^(pipeline|handwritten|raw_sink)/${case_}\$" |
        awk -v c="$case_" '$1 == c { print $5 }')
    done
    printf '%s\t%s%s\n' "$c" "$case_" "$runs" >>"$tmp/reruns.tsv"
  done < <(layout_medians "$tmp/wall.tsv")

  mkdir -p "$perf_data"
  cp "$tmp/wall.tsv" "$wall"
  cp "$tmp/reruns.tsv" "$reruns"
  cp "$tmp/callgrind.tsv" "$callgrind"
  cp "$tmp/batch1.tsv" "$batch1"
  cp "$tmp/overhead-run.tsv" "$memory_run"
}

wall_table() {  # compiler -> the default layout's wall-clock table
  awk -F'\t' -v c="$1" 'BEGIN { OFS = "\t"
      print "case (median ns/record)", "pipeline", "handwritten", "raw_sink", "pipe/hand", "pipe/raw", "target" }
    $1 == c && $2 == "default" {
      limit = $3 ~ /batch:1$/ ? 1.05 : ($3 ~ /batch:512$/ ? 1.02 : 0)
      print $3, $4, $5, $6, $7, $8, limit == 0 ? "" : "<= " limit ": " ($7 <= limit ? "met" : "**MISSED**") }' \
    "$wall" | md_table lrrrrrl
}
layout_table() {  # compiler -> pipeline / handwritten at each layout, their median and spread
  awk -F'\t' -v c="$1" '
    FILENAME == ARGV[1] { if ($1 == c) rerun[$2] = $3 ", " $4 ", " $5; next }
    FILENAME == ARGV[2] { if ($1 == c) { med[$2] = $3; verdict[$2] = $4 } next }
    FNR > 1 && $1 == c {
      if (!($2 in li)) { li[$2] = nl + 0; layout[nl++] = $2 }
      if (!($3 in seen)) { seen[$3] = 1; cases[nc++] = $3 }
      r[$3, li[$2]] = $7
    }
    END {
      head = "case"
      for (j = 0; j < nl; ++j) head = head "\t" (layout[j] == "default" ? "default layout" : layout[j])
      print head "\tmedian\tspread (points)\ttarget (median)\tmissed: three more runs"
      for (i = 0; i < nc; ++i) {
        k = cases[i]; row = k; hi = lo = r[k, 0]
        for (j = 0; j < nl; ++j) {
          row = row "\t" r[k, j]
          if (r[k, j] > hi) hi = r[k, j]
          if (r[k, j] < lo) lo = r[k, j]
        }
        printf "%s\t%s\t%.1f\t%s\t%s\n", row, med[k], (hi - lo) * 100, verdict[k], rerun[k]
      }
    }' "$reruns" <(layout_medians "$wall") "$wall" | md_table lrrrrrll
}
callgrind_table() {  # compiler build -> instructions per record
  awk -F'\t' -v c="$1" -v b="$2" 'BEGIN { OFS = "\t"
      head = "case\tpipeline\thandwritten\traw sink\tpipeline / handwritten\twithin +2%" }
    NR > 1 && $1 == c && $2 == b {
      row = sprintf("%s batch %s\t%s\t%s\t%s\t%+.2f%%\t%s", $3, $4, $5, $6, $7, ($5 / $6 - 1) * 100,
        $5 <= $6 * 1.02 ? "yes" : "**no**")
      if ($8 != "") {
        head = head "\thandwritten, parts by reference\tpipeline / by reference"
        row = row sprintf("\t%s\t%+.2f%%", $8, ($5 / $8 - 1) * 100)
      }
      if (!n++) print head
      print row
    }' "$callgrind" | md_table lrrrrlrr
}
batch1_table() {  # build -> batch 1's instructions, data reads and writes per record
  awk -F'\t' -v b="$1" '
    NR > 1 && $1 == b {
      if (!($2 in seen)) { seen[$2] = 1; policies[np++] = $2 }
      if (!($3 in vseen)) { vseen[$3] = 1; names = names (nv++ ? " / " : "") ($3 == "handwritten_ref" ? "by reference" : $3) }
      for (f = 4; f <= 6; ++f) cell[$2, f] = cell[$2, f] (cell[$2, f] == "" ? "" : " / ") $f
    }
    END {
      print "case\tinstructions: " names "\tdata reads: " names "\tdata writes: " names
      for (i = 0; i < np; ++i)
        print policies[i] " batch 1\t" cell[policies[i], 4] "\t" cell[policies[i], 5] "\t" cell[policies[i], 6]
    }' "$batch1" | md_table lrrr
}

memory_tables() {
  [[ $reuse == 1 ]] || memory_measure
  need_data "$wall" "$reruns" "$callgrind" "$batch1" "$memory_run"
  run_table "$memory_run" | put_table memory-run
  local c
  for c in gcc clang; do
    wall_table "$c" | put_table "memory-wall-$c"
    layout_table "$c" | put_table "memory-layout-$c"
    callgrind_table "$c" overhead_bench | put_table "memory-callgrind-$c"
    callgrind_table "$c" overhead_split_bench | put_table "memory-callgrind-split-$c"
  done
  batch1_table overhead_bench | put_table memory-batch1
  batch1_table overhead_split_bench | put_table memory-batch1-split
}

# ---- Kafka --------------------------------------------------------------------------------------
# docs/data/kafka-compare.tsv: kafka_bench --compare's lines, on librdkafka's mock cluster and on
# a broker (the kafka_broker tests' fixture: Kafka 4.4, one KRaft node on loopback).
kafka_compare=$perf_data/kafka-compare.tsv
kafka_run=$perf_data/kafka-run.tsv

kafka_rows() {  # cluster < kafka_bench --compare's output -> kafka-compare.tsv rows
  awk -v c="$1" 'BEGIN { OFS = "\t" } $1 ~ /\// && NF >= 6 { print c, $1, $2, $3, $4, $5, $6 }'
}
kafka_measure() {
  local bench=build/bench/bench/kafka_bench
  [[ -x $bench ]] || {
    echo "performance_report: build kafka_bench first (cmake --build --preset bench --target kafka_bench)" >&2
    exit 1
  }
  local fixture=${KAFKA_FIXTURE:-build/default/tests/kafka_broker/commit_order_kafka_broker_fixture}
  local jars=${COMMIT_ORDER_KAFKA_JARS:-${XDG_CACHE_HOME:-$HOME/.cache}/commit_order/kafka-4.4.0}
  [[ -x $fixture ]] || {
    echo "performance_report: build the broker fixture first (cmake --build --preset default --target commit_order_kafka_broker_fixture)" >&2
    exit 1
  }
  local rounds=${KAFKA_ROUNDS:-21}
  {
    printf 'measured\t%s\n' "$(now)"
    printf 'build\t%s, the bench preset (Release, -O3)\n' "$(g++ --version | head -n1)"
    printf 'commit\t%s\n' "$(git rev-parse --short HEAD)"
    printf 'rounds\t%s\n' "$rounds"
    printf 'load average before the mock-cluster run\t%s\n' "$(load_average)"
  } >"$tmp/kafka-run.tsv"
  printf 'cluster\tcase\tpipeline_ns\thandwritten_ns\twall_ratio\tcpu_ratio\ttarget\n' \
    >"$tmp/kafka.tsv"
  "$bench" --rounds "$rounds" --compare | kafka_rows mock >>"$tmp/kafka.tsv"
  "$fixture" start "$tmp/broker.info" "$jars" >"$tmp/broker.log" 2>&1
  printf 'load average before the broker run\t%s\n' "$(load_average)" >>"$tmp/kafka-run.tsv"
  COMMIT_ORDER_KAFKA_BOOTSTRAP=$(head -1 "$tmp/broker.info") "$bench" --rounds "$rounds" --compare \
    >"$tmp/kafka_broker.txt" || { "$fixture" stop "$tmp/broker.info"; exit 1; }
  "$fixture" stop "$tmp/broker.info" >/dev/null
  kafka_rows broker <"$tmp/kafka_broker.txt" >>"$tmp/kafka.tsv"
  mkdir -p "$perf_data"
  cp "$tmp/kafka.tsv" "$kafka_compare"
  cp "$tmp/kafka-run.tsv" "$kafka_run"
}
kafka_table() {  # cluster
  awk -F'\t' -v c="$1" 'BEGIN { OFS = "\t"
      print "case", "pipeline ns/record", "hand-written ns/record", "wall ratio (hand/pipeline)", "cpu ratio", "target ≥ 0.9" }
    $1 == c { print "`" $2 "`", $3, $4, $5, $6, $7 == "met" ? "met" : "**" $7 "**" }' \
    "$kafka_compare" | md_table lrrrrl
}
kafka_tables() {
  [[ $reuse == 1 ]] || kafka_measure
  need_data "$kafka_compare" "$kafka_run"
  run_table "$kafka_run" | put_table kafka-run
  kafka_table mock | put_table kafka-mock
  kafka_table broker | put_table kafka-broker
}

if [[ $what == all || $what == memory ]]; then memory_tables; fi
if [[ $what == all || $what == sqlite ]]; then bench/sqlite_report.sh; fi
if [[ $what == all || $what == kafka ]]; then kafka_tables; fi
if [[ $what == all || $what == postgres ]]; then bench/postgres_report.sh; fi
if [[ $what == all || $what == peer ]]; then bench/peer/report.sh; fi
echo "performance_report: wrote the $what tables of $perf_doc"
