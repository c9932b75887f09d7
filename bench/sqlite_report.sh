#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The SQLite tables of docs/performance.md and their chart (docs/performance-sqlite.png, drawn by
# gnuplot), from sqlite_bench's JSON output and bench/sqlite_callgrind_report.sh. Called by
# bench/performance_report.sh.
#
#   bench/sqlite_report.sh [path/to/sqlite_bench]
#
# PAIRS (default 151): repetitions of each case, run in library/hand-written pairs. The run's
# JSON and console output go to SQLITE_REPORT_DIR (default build/bench/sqlite-report); what the
# tables are made of to docs/data/sqlite-*.tsv (docs/data/README.md). REUSE=1 makes the tables
# and the chart from those without measuring.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/report_lib.sh
source bench/report_lib.sh
bench=${1:-build/bench/bench/sqlite_bench}
command -v jq >/dev/null || { echo "sqlite_report: needs jq (apt-get install jq)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "sqlite_report: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
out=${SQLITE_REPORT_DIR:-build/bench/sqlite-report}
pairs=${PAIRS:-151}
chart=${SQLITE_CHART:-docs/performance-sqlite.png}
summary=$perf_data/sqlite-summary.tsv
callgrind=$perf_data/sqlite-callgrind.tsv
run=$perf_data/sqlite-run.tsv

if [[ $reuse != 1 ]]; then
  [[ -x $bench ]] || { echo "sqlite_report: build the bench preset first ($bench)" >&2; exit 1; }
  mkdir -p "$out" "$perf_data"
  "$bench" --pairs="$pairs" --benchmark_color=false --benchmark_out="$out/bench.json" \
    --benchmark_out_format=json >"$out/console.txt" 2>&1 || {
    echo "sqlite_report: $bench failed:" >&2
    tail -n 20 "$out/console.txt" >&2
    exit 1
  }
  bench/sqlite_callgrind_report.sh "$bench" >"$out/callgrind.tsv"
  {
    printf 'policy\tsync\tbatch\tpairs\tlibrary_rows_s\thandwritten_rows_s\tratio\tratio_q1\tratio_q3\t'
    printf 'cpu_ratio\tlibrary_q1\tlibrary_q3\thandwritten_q1\thandwritten_q3\n'
    jq -r -f bench/sqlite_summary.jq "$out/bench.json"
  } >"$out/summary.tsv"
  [[ $(wc -l <"$out/summary.tsv") -eq 13 ]] || {
    echo "sqlite_report: expected 12 cases in $out/bench.json, found $(($(wc -l <"$out/summary.tsv") - 1))" >&2
    exit 1
  }
  {
    printf 'measured\t%s\n' "$(jq -r '.context.date' "$out/bench.json")"
    printf 'machine\t%s\n' "$(machine)"
    printf 'load average at the start\t%s\n' \
      "$(jq -r '.context.load_avg | map(. * 100 | round / 100) | join(", ")' "$out/bench.json")"
    printf 'build\t%s, the bench preset (Release, -O3)\n' "$(g++ --version | head -n1)"
    printf 'commit\t%s\n' "$(git rev-parse --short HEAD)"
    printf 'SQLite\t%s\n' "$(sqlite3 --version | cut -d' ' -f1)"
    printf 'pairs per case\t%s\n' "$(awk -F'\t' 'NR == 2 { print $4 }' "$out/summary.tsv")"
    printf 'callgrind\tover %s and %s records, the difference per record\n' "${N1:-1024}" "${N2:-3072}"
  } >"$out/run.tsv"
  cp "$out/summary.tsv" "$summary"
  cp "$out/callgrind.tsv" "$callgrind"
  cp "$out/run.tsv" "$run"
fi
need_data "$summary" "$callgrind" "$run"

# ---- the chart: rows/s against batch size, one panel per policy and synchronous level --------
# It needs the rows/s quartiles, which a summary transcribed from the page does not have (the
# committed run's: docs/data/README.md); then the chart drawn at that run is kept.
plot=$(mktemp -d)
trap 'rm -rf "$plot"' EXIT
awk -F'\t' -v dir="$plot" 'NR > 1 { print > (dir "/" $1 "-" $2 ".dat") }' "$summary"
run_pairs=$(awk -F'\t' 'NR == 2 { print $4 }' "$summary")
if awk -F'\t' 'NR > 1 && ($11 == "" || $12 == "" || $13 == "" || $14 == "") { bad = 1 } END { exit !bad }' \
  "$summary"; then
  echo "sqlite_report: $summary has no rows/s quartiles: $chart is kept as it is" >&2
else
gnuplot <<GNUPLOT
set terminal pngcairo size 1000,760 enhanced font "DejaVu Sans,10" background rgb "white"
set output "$chart"
set multiplot layout 2,2 title "SQLite (WAL): rows per second, commit\\\\_order::pipeline against the hand-written sqlite3 loop issuing the same statements\\n(median of $run_pairs repetitions each, bars from the first to the third quartile; log scales)"
set datafile separator "\t"
set logscale xy
set xrange [0.7:750]
set xtics ("1" 1, "64" 64, "512" 512)
set format y "%.0s%c"
set xlabel "batch size (records per poll)"
set ylabel "rows/s"
set grid
set key top left
do for [p in "TransactionalPosition AtLeastOnce"] {
  do for [s in "FULL NORMAL"] {
    set title sprintf("%s, synchronous=%s", p, s)
    data = sprintf("$plot/%s-%s.dat", p, s)
    # Each point is a median; its bar spans the repetitions' quartiles. The hand-written points
    # sit slightly to the right so that both bars show.
    plot data using 3:5 with lines lw 2 lc 1 notitle, \
         data using 3:5:11:12 with yerrorbars lc 1 pt 7 ps 0.8 title "library", \
         data using (\$3 * 1.08):6 with lines lw 2 dt 2 lc 2 notitle, \
         data using (\$3 * 1.08):6:13:14 with yerrorbars lc 2 pt 6 ps 1.2 title "hand-written"
  }
}
unset multiplot
GNUPLOT
fi

# ---- the tables ---------------------------------------------------------------------------------
# Targets (issue 13): library / hand-written >= 0.95 at batch 64 and 512, >= 0.90 at batch 1; and
# AtLeastOnce within 0.9x of the transactional-write loop.
rate='function rate(r) { return r >= 10000 ? sprintf("%.0f k", r / 1000) : sprintf("%.0f", r) }'
run_table "$run" | put_table sqlite-run
awk -F'\t' "$rate"'
  BEGIN { OFS = "\t"; print "policy", "synchronous", "batch", "library rows/s", "hand-written rows/s",
    "library / hand-written", "quartiles of the pairs", "target", "met" }
  NR > 1 { t = $3 == 1 ? 0.90 : 0.95
    print $1, $2, $3, rate($5), rate($6), sprintf("%.3f", $7), sprintf("%.2f – %.2f", $8, $9),
      sprintf("≥ %.2f", t), ($7 >= t ? "yes" : "**no**") }' "$summary" |
  md_table lllrrrlll | put_table sqlite-wall
awk -F'\t' "$rate"'
  BEGIN { OFS = "\t"; print "synchronous", "batch", "library AtLeastOnce rows/s",
    "transactional-write loop rows/s", "ratio", "target", "met" }
  NR > 1 && $1 == "AtLeastOnce" {
    print $2, $3, rate($5), rate($6), sprintf("%.3f", $7), "≥ 0.90", ($7 >= 0.9 ? "yes" : "**no**") }' \
  "$summary" | md_table lrrrrll | put_table sqlite-at-least-once
awk -F'\t' 'NR > 1 { key = $1 "\t" $2; if (!(key in row)) order[n++] = key; row[key] = row[key] sprintf("\t%.3f", $10) }
  END { print "policy\tsynchronous\tbatch 1\tbatch 64\tbatch 512"
    for (i = 0; i < n; i++) print order[i] row[order[i]] }' "$summary" |
  md_table llrrr | put_table sqlite-cpu
awk -F'\t' 'BEGIN { OFS = "\t"; print "case", "library", "hand-written (same statements)",
    "library / hand-written", "library − hand-written", "library, position store on its own connection",
    "own connection / library" }
  NR > 1 { print $1 " " $2 " batch " $3, $4, $5, sprintf("%.4f (%+.2f%%)", $4 / $5, ($4 / $5 - 1) * 100),
    sprintf("%.1f", $4 - $5), $6 == "" ? "n/a" : $6, $6 == "" ? "n/a" : sprintf("%+.1f%%", ($6 / $4 - 1) * 100) }' \
  "$callgrind" | md_table lrrrrrr | put_table sqlite-callgrind
