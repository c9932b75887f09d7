#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Instructions per record through the pipeline into SQLite against the hand-written sqlite3
# loop that issues the same statements, counted by callgrind (repeatable, unlike the wall
# clock; an fsync's wait is not an instruction, so FULL and NORMAL differ only by the calls
# that request it). Each variant runs twice, over N1 and N2 records; the difference divided
# by N2 - N1 is the marginal cost of one record, free of the set-up both runs share (seeding
# the database, opening connections, recovery).
#
#   bench/sqlite_callgrind_report.sh [path/to/sqlite_bench]
#
# prints tab-separated columns, a header line first: policy, synchronous, batch, the library's
# and the hand-written loop's instructions per record, and (AtLeastOnce only) the library's with
# the position store on a connection of its own. bench/sqlite_report.sh makes the table.
set -euo pipefail
shopt -s inherit_errexit  # a failed run inside $(...) stops the report instead of printing 0
bench=${1:-build/bench/bench/sqlite_bench}
[[ -x $bench ]] || { echo "sqlite_callgrind_report: no benchmark at $bench (cmake --preset bench && cmake --build --preset bench)" >&2; exit 1; }
# Multiples of 512, so every batch size ends both runs on a whole batch.
n1=${N1:-1024}
n2=${N2:-3072}

instructions() {  # variant policy sync batch records
  local out
  out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bench" --count "$@" 2>&1) || {
    echo "sqlite_callgrind_report: $bench --count $* failed:" >&2
    echo "$out" >&2
    exit 1
  }
  local n
  n=$(awk '/Collected :/ {print $4}' <<<"$out")
  [[ -n $n ]] || { echo "sqlite_callgrind_report: no instruction count from $bench --count $*" >&2; exit 1; }
  echo "$n"
}
per_record() {  # variant policy sync batch -> instructions per record (1 decimal)
  local a b
  a=$(instructions "$1" "$2" "$3" "$4" "$n1")
  b=$(instructions "$1" "$2" "$3" "$4" "$n2")
  awk -v a="$a" -v b="$b" -v n="$((n2 - n1))" 'BEGIN { printf "%.1f", (b - a) / n }'
}

# The last column is a reference configuration, not a twin: AtLeastOnce through the library
# with the position store on a connection of its own instead of the sink's.
printf 'policy\tsync\tbatch\tlibrary\thandwritten\town_connection\n'
for policy in TransactionalPosition AtLeastOnce; do
  for sync in FULL NORMAL; do
    for batch in 1 64 512; do
      p=$(per_record pipeline "$policy" "$sync" "$batch")
      h=$(per_record handwritten "$policy" "$sync" "$batch")
      one=""
      # In an if, not after &&: a failed run stops the report instead of leaving the column empty.
      if [[ $policy == AtLeastOnce ]]; then
        one=$(per_record pipeline_own_connection "$policy" "$sync" "$batch")
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$policy" "$sync" "$batch" "$p" "$h" "$one"
    done
  done
done
