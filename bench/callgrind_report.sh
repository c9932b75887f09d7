#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Instructions per record, pipeline vs its hand-written twin vs the raw sink, counted by
# callgrind (repeatable, unlike wall-clock time). Each variant runs twice, over N1 and N2
# records; the difference divided by N2 - N1 is the marginal cost of one record, free of the
# set-up both runs share (building the log, loading the program).
#
#   bench/callgrind_report.sh [path/to/overhead_bench] [--with-ref]   prints a markdown table
#
# --with-ref adds the twin that reaches its parts through pointers (`handwritten_ref`, in
# overhead_split_bench only) and the pipeline's ratio to it.
set -euo pipefail
shopt -s inherit_errexit  # a failed run inside $(...) stops the report instead of printing 0
bench=${1:-build/bench/bench/overhead_bench}
with_ref=${2:-}
[[ -x $bench ]] || { echo "callgrind_report: no benchmark at $bench (cmake --preset bench && cmake --build --preset bench)" >&2; exit 1; }
n1=${N1:-8192}
n2=${N2:-24576}

instructions() {  # variant policy batch records
  local out
  out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bench" --count "$@" 2>&1) || {
    echo "callgrind_report: $bench --count $* failed:" >&2
    echo "$out" >&2
    exit 1
  }
  awk '/Collected :/ {print $4}' <<<"$out"
}
per_record() {  # variant policy batch -> instructions per record (2 decimals)
  local a b
  a=$(instructions "$1" "$2" "$3" "$n1")
  b=$(instructions "$1" "$2" "$3" "$n2")
  awk -v a="$a" -v b="$b" -v n="$((n2 - n1))" 'BEGIN { printf "%.2f", (b - a) / n }'
}

if [[ $with_ref == --with-ref ]]; then
  echo "| case | pipeline | handwritten | raw sink | pipeline / handwritten | within +2% | handwritten, parts by reference | pipeline / by reference |"
  echo "|---|---:|---:|---:|---:|---|---:|---:|"
else
  echo "| case | pipeline | handwritten | raw sink | pipeline / handwritten | within +2% |"
  echo "|---|---:|---:|---:|---:|---|"
fi
for policy in AtMostOnce AtLeastOnce TransactionalPosition; do
  for batch in 1 64 512; do
    p=$(per_record pipeline "$policy" "$batch")
    h=$(per_record handwritten "$policy" "$batch")
    r=$(per_record raw_sink "$policy" "$batch")
    ratio=$(awk -v p="$p" -v h="$h" 'BEGIN { printf "%+.2f%%", (p / h - 1) * 100 }')
    met=$(awk -v p="$p" -v h="$h" 'BEGIN { print (p <= h * 1.02) ? "yes" : "**no**" }')
    if [[ $with_ref == --with-ref ]]; then
      f=$(per_record handwritten_ref "$policy" "$batch")
      to_ref=$(awk -v p="$p" -v f="$f" 'BEGIN { printf "%+.2f%%", (p / f - 1) * 100 }')
      echo "| $policy batch $batch | $p | $h | $r | $ratio | $met | $f | $to_ref |"
    else
      echo "| $policy batch $batch | $p | $h | $r | $ratio | $met |"
    fi
  done
done
