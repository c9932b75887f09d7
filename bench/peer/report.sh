#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The Kafka Connect tables of docs/performance.md and their chart: runs bench/peer/run at batch
# 100, 500 and 2000 (each a broker, a PostgreSQL server and the three consumers of its own), keeps
# the results in docs/data/peer-batch<B>.json, draws docs/peer-records-per-second.svg with gnuplot
# and writes the tables. Called by bench/performance_report.sh.
#   cmake --build build/default --target peer_bench commit_order_kafka_broker_fixture &&
#   bench/peer/report.sh [build dir]
# REUSE=1 runs nothing: it takes the results of earlier runs (<build>/peer-results-batch<B>.json)
# where present, else docs/data's.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/report_lib.sh
source bench/report_lib.sh
build=${1:-build/default}
command -v gnuplot >/dev/null || { echo "peer report: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
command -v jq >/dev/null || { echo "peer report: needs jq" >&2; exit 1; }
chart=${PEER_CHART:-docs/peer-records-per-second.svg}
batches=(100 500 2000)
mkdir -p "$perf_data"
for b in "${batches[@]}"; do
  results=$build/peer-results-batch$b.json
  if [[ $reuse != 1 ]]; then
    BATCH=$b bench/peer/run "$build" >&2
  elif [[ ! -f $results ]]; then
    need_data "$perf_data/peer-batch$b.json"
    continue
  fi
  cp "$results" "$perf_data/peer-batch$b.json"
done

tsv=$(mktemp)
trap 'rm -f "$tsv"' EXIT
for b in "${batches[@]}"; do
  jq -r --arg b "$b" '[$b, .co_alo.records_per_s, .co_tx.records_per_s, .connect.records_per_s] | @tsv' \
    "$perf_data/peer-batch$b.json" >>"$tsv"
done
gnuplot <<PLOT
set terminal svg size 760,440 font "sans,12" background rgb "white"
set output "$chart"
set title "Kafka into PostgreSQL: records per second against batch size"
set logscale x
set xtics ("100" 100, "500" 500, "2000" 2000)
set xrange [70:3000]
set yrange [0:*]
set xlabel "batch (records per poll and per write)"
set ylabel "records per second"
set key top left
set grid
set datafile separator "\t"
plot "$tsv" using 1:3 with linespoints lw 2 pt 7 title "commit_order TransactionalPosition", \
     "$tsv" using 1:2 with linespoints lw 2 pt 5 title "commit_order AtLeastOnce", \
     "$tsv" using 1:4 with linespoints lw 2 pt 9 dt 2 title "Kafka Connect + Debezium JDBC sink (upsert)"
PLOT

# The run: the records (the same at every batch size) and the load when the runs ended.
jq -r '.config | "records\t\(.records) (\(.ids) payments, two versions each) over \(.partitions) partitions",
    "latency\tat \(.rate) records/s over \(.latency_ids * 2) records",
    "load average after the runs\t\(.load_average // "not recorded")"' \
  "$perf_data/peer-batch2000.json" >"$tsv"
run_table "$tsv" | put_table peer-run
# shellcheck disable=SC2016 # the backticks are markdown's
names='{co_tx: "commit_order `TransactionalPosition`", co_alo: "commit_order `AtLeastOnce`",
  connect: "Kafka Connect + Debezium JDBC"}'
for b in "${batches[@]}"; do
  jq -r --arg b "$b" "$names"' as $n | ["co_tx", "co_alo", "connect"][] as $w | .[$w]
    | [$b, $n[$w], .records_per_s, .cpu_us_per_record, .peak_rss_mb, .latency_p50_ms,
       .latency_p99_ms, .kill_lost, .kill_regressed, .kill_writes_beyond_one_per_record] | @tsv' \
    "$perf_data/peer-batch$b.json"
done | { printf 'batch\tconsumer\trecords/s\tCPU µs/record\tpeak RSS MB\tlatency p50 ms\tp99 ms\t'
  printf 'SIGKILL: lost\tregressed\trewritten\n'; cat; } | md_table rlrrrrrrrr | put_table peer-results
# Each commit_order consumer against Connect, at each batch size.
for b in "${batches[@]}"; do
  jq -r --arg b "$b" "$names"' as $n | ["co_tx", "co_alo"][] as $w | .connect as $c | .[$w]
    | [$b, $n[$w], (.records_per_s / $c.records_per_s * 100 | round / 100),
       ($c.cpu_us_per_record / .cpu_us_per_record * 10 | round / 10),
       ($c.peak_rss_mb / .peak_rss_mb | round)] | @tsv' "$perf_data/peer-batch$b.json"
done | { printf '%s\t' batch consumer "records/s, × Connect's" "Connect's CPU per record, × ours"
  echo "Connect's peak RSS, × ours"; cat; } | md_table rlrrr | put_table peer-ratios
