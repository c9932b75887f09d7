#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The PostgreSQL tables of docs/performance.md and their chart: runs bench/postgres_bench (PAIRS
# pairs of every case, 31 unless given), then its batch-1 cases again on servers left at glibc's
# default heap trimming; keeps the Google Benchmark JSON of the first run in
# docs/data/postgres-bench.json and each run's medians in docs/data/postgres-*.tsv
# (docs/data/README.md), draws docs/postgres-rows-per-second.svg with gnuplot and writes the
# tables. Called by bench/performance_report.sh; REUSE=1 writes the tables and the chart from
# docs/data/ without measuring.
#   cmake --preset bench && cmake --build --preset bench --target postgres_bench &&
#   bench/postgres_report.sh [path/to/postgres_bench]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/report_lib.sh
source bench/report_lib.sh
bench=${1:-build/bench/bench/postgres_bench}
command -v gnuplot >/dev/null || { echo "postgres_report: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
pairs=${PAIRS:-31}
chart=${POSTGRES_CHART:-docs/postgres-rows-per-second.svg}
rates=$perf_data/postgres-rows-per-second.tsv
default_malloc=$perf_data/postgres-default-malloc.tsv
run=$perf_data/postgres-run.tsv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
header='server\tbatch\tpipeline_rows_s\thandwritten_rows_s\tpair_ratio\tpairs\n'

if [[ $reuse != 1 ]]; then
  [[ -x $bench ]] || { echo "postgres_report: build postgres_bench in the bench preset first" >&2; exit 1; }
  mkdir -p "$perf_data"
  {
    printf 'measured\t%s\n' "$(now)"
    printf 'machine\t%s\n' "$(machine)"
    printf 'load average at the start\t%s\n' "$(load_average)"
    printf 'build\t%s, the bench preset (Release, -O3)\n' "$(g++ --version | head -n1)"
    printf 'commit\t%s\n' "$(git rev-parse --short HEAD)"
    # The server binaries the benchmark starts (examples/crash_lab/lab/pg_server.hpp).
    pg_bin=${COMMIT_ORDER_PG_BINDIR:-$(find /usr/lib/postgresql -maxdepth 2 -name bin | sort -V | tail -1)}
    printf 'servers\t%s, GLIBC_TUNABLES=glibc.malloc.trim_threshold=67108864 (second table: glibc default)\n' \
      "$("$pg_bin/postgres" --version)"
  } >"$work/run.tsv"
  "$bench" --pairs="$pairs" --table="$work/rates" --benchmark_out="$work/bench.json" \
    --benchmark_out_format=json --benchmark_color=false >"$work/console" 2>/dev/null
  # Batch 1 again on servers left at glibc's default heap trimming: what it costs.
  "$bench" --pairs="$pairs" --server-malloc=default --benchmark_filter='/batch:1/' \
    --table="$work/default_malloc" --benchmark_color=false >"$work/console" 2>/dev/null
  cp "$work/bench.json" "$perf_data/postgres-bench.json"
  { printf '%b' "$header"; sort -k1,1 -k2,2n "$work/rates"; } >"$rates"
  { printf '%b' "$header"; sort -k1,1 -k2,2n "$work/default_malloc"; } >"$default_malloc"
  cp "$work/run.tsv" "$run"
fi
need_data "$rates" "$default_malloc" "$run"

# rows/s against batch size: one line per variant and server.
tail -n +2 "$rates" >"$work/rates.dat"
gnuplot <<PLOT
set terminal svg size 760,460 font "sans,12" background rgb "white"
set output "$chart"
set title "PostgreSQL, TransactionalPosition: rows per second against batch size"
set logscale xy
set xtics ("1" 1, "64" 64, "512" 512)
set xrange [0.7:800]
set xlabel "batch (records per transaction)"
set ylabel "rows per second (median)"
set key bottom right
set grid
set datafile separator "\t"
plot "< grep '^fsync_off' $work/rates.dat" using 2:3 with linespoints lw 2 pt 7 title "pipeline, fsync=off", \
     "< grep '^fsync_off' $work/rates.dat" using 2:4 with linespoints lw 2 pt 6 dt 2 title "hand-written, fsync=off", \
     "< grep '^fsync_on' $work/rates.dat" using 2:3 with linespoints lw 2 pt 5 title "pipeline, fsync=on", \
     "< grep '^fsync_on' $work/rates.dat" using 2:4 with linespoints lw 2 pt 4 dt 2 title "hand-written, fsync=on"
PLOT

# Targets (issue 12): the median of the pairs' ratios at least 0.95 at batch 1, 0.9 at batch 512.
ratio_table() {
  awk -F'\t' 'BEGIN { OFS = "\t"; print "case (median rows/s)", "pairs", "pipeline", "handwritten",
      "med/med", "med pair", "target (median pair ratio)" }
    NR > 1 { t = $2 == 1 ? 0.95 : ($2 == 512 ? 0.90 : 0)
      print "postgres/TransactionalPosition/" $1 "/batch:" $2, $6, $3, $4, sprintf("%.3f", $3 / $4),
        sprintf("%.3f", $5), t == 0 ? "" : sprintf(">= %.2f: %s", t, $5 >= t ? "met" : "**MISSED**") }' \
    "$1" | md_table lrrrrrl
}
run_table "$run" | put_table postgres-run
ratio_table "$rates" | put_table postgres-ratios
ratio_table "$default_malloc" | put_table postgres-default-malloc
