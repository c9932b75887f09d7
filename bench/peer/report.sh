#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The peer section of docs/performance.md: runs bench/peer/run at batch 100, 500 and 2000 (each
# a broker, a PostgreSQL server and the three consumers of its own), keeps the results in
# docs/data/peer-batch<B>.json, draws docs/peer-records-per-second.svg with gnuplot, and prints
# the section's markdown on stdout. bench/performance_report.sh puts it in its section.
#   cmake --build build/default --target peer_bench commit_order_kafka_broker_fixture &&
#   bench/peer/report.sh [build dir]
# REUSE=1 takes the results of earlier runs (<build>/peer-results-batch<B>.json) where present.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/default}
command -v gnuplot >/dev/null || { echo "peer report: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
command -v jq >/dev/null || { echo "peer report: needs jq" >&2; exit 1; }
batches=(100 500 2000)
mkdir -p docs/data
for b in "${batches[@]}"; do
  if [[ ${REUSE:-0} != 1 || ! -f $build/peer-results-batch$b.json ]]; then
    BATCH=$b bench/peer/run "$build" >&2
  fi
  cp "$build/peer-results-batch$b.json" "docs/data/peer-batch$b.json"
done

tsv=$(mktemp)
trap 'rm -f "$tsv"' EXIT
for b in "${batches[@]}"; do
  jq -r --arg b "$b" '[$b, .co_alo.records_per_s, .co_tx.records_per_s, .connect.records_per_s] | @tsv' \
    "docs/data/peer-batch$b.json" >>"$tsv"
done
gnuplot <<PLOT
set terminal svg size 760,440 font "sans,12" background rgb "white"
set output "docs/peer-records-per-second.svg"
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

config=$(jq -r '.config | "\(.records) records (\(.ids) payments, two versions each) over \(.partitions) partitions; latency at \(.rate) records/s over \(.latency_ids * 2) records"' docs/data/peer-batch500.json)
# The load when the runs ended (results of runs before it was recorded: now).
load=$(jq -r '.config.load_average // empty' docs/data/peer-batch2000.json)
load=${load:-$(cut -d' ' -f1-3 /proc/loadavg)}
cat <<DOC
## Kafka into PostgreSQL: commit_order against Kafka Connect

The peer a team would run instead is Kafka Connect with a JDBC sink connector. \`bench/peer/run\`
(commit_order's side is \`bench/peer/peer.cpp\`) measures Kafka Connect 4.4.0 (a standalone
worker) with Debezium's JDBC sink connector 3.4.0 in \`insert.mode=upsert\`, fetched with Maven
by \`tools/kafka-connect/fetch\`, against commit_order under \`AtLeastOnce\`
(\`postgres::upsert_sink\` and \`postgres::position_store\`) and \`TransactionalPosition\`
(\`postgres::guarded_upsert_sink\`, the positions in its transactions). All three read the same
records — JSON payments in Connect's envelope (\`json::member<"payload">\` on our side,
\`JsonConverter\` with schemas on Connect's) — each from a topic of its own on one Kafka 4.4
broker, into tables of the same shape on one PostgreSQL 15 server with fsync on, at equal batch
sizes (commit_order's \`batch_size\`, Connect's \`consumer.max.poll.records\` and Debezium's
\`batch.size\`). Everything else is each one's default. $config. g++ 12, \`default\` preset
(Release, -O2), the 2-core machine, load average $load at the end of the runs.

- **records/s**: from the first row visible in the table to the last (a poller reads it every
  50 ms), the topic written before the consumer starts.
- **CPU µs/record**, **peak RSS**: the consumer process's CPU time over the same span (its
  start — a JVM's, for Connect — excluded) per record, and its VmHWM, read from \`/proc\`.
- **latency**: from a record's produce time (in its payload) to its transaction's commit
  time (\`track_commit_timestamp\`), the producer pacing the records with the consumer running.
- **after SIGKILL**: the consumer killed when half the payments are in the table, started again
  and run to the end. *lost*: payments not at their last version; *regressed*: rows left at an
  older version; *rewritten*: committed row writes beyond one per record (records replayed and
  written again), counted by a trigger.

DOC
for b in "${batches[@]}"; do
  f=docs/data/peer-batch$b.json
  echo "Batch $b:"
  echo
  echo "| consumer | records/s | CPU µs/record | peak RSS MB | latency p50 ms | p99 ms | SIGKILL: lost | regressed | rewritten |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for who in co_tx co_alo connect; do
    name=$(case $who in co_tx) echo "commit_order \`TransactionalPosition\`" ;;
           co_alo) echo "commit_order \`AtLeastOnce\`" ;; connect) echo "Kafka Connect + Debezium JDBC" ;; esac)
    jq -r --arg n "$name" --arg w "$who" '.[$w] | "| \($n) | \(.records_per_s) | \(.cpu_us_per_record) | \(.peak_rss_mb) | \(.latency_p50_ms) | \(.latency_p99_ms) | \(.kill_lost) | \(.kill_regressed) | \(.kill_writes_beyond_one_per_record) |"' "$f"
  done
  echo
done
ratio() { jq -r "(.co_tx.$1 / .connect.$1 * 100 | round / 100)" docs/data/peer-batch500.json; }
cat <<DOC
![records per second against batch size](peer-records-per-second.svg)

At batch 500, \`TransactionalPosition\` moves $(ratio records_per_s)× Connect's records per second, at
$(jq -r '(.connect.cpu_us_per_record / .co_tx.cpu_us_per_record * 10 | round / 10)' docs/data/peer-batch500.json)× less CPU per record and
$(jq -r '(.connect.peak_rss_mb / .co_tx.peak_rss_mb | round)' docs/data/peer-batch500.json)× less memory. What neither table shows
after a SIGKILL is how: no payment is lost and none regressed in any of the three (all three
commit their position after the write, and an upsert of a replayed record writes the same
values), but Connect writes again every record since its last offset commit (its worker
commits sink offsets every \`offset.flush.interval.ms\`, 60 s by default), \`AtLeastOnce\` at
most the unit in flight, and \`TransactionalPosition\` none: its rows and positions commit
together, and the guard drops what the position already passed. An upsert hides a replay only
while the table is all there is: a trigger, a counter or a downstream change feed sees every
rewrite (the *rewritten* column counts them with a trigger).
DOC
