#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Instructions per record, pipeline vs its hand-written twin vs the raw sink, counted by
# callgrind (repeatable, unlike wall-clock time). Each variant runs twice, over N1 and N2
# records; the difference divided by N2 - N1 is the marginal cost of one record, free of the
# set-up both runs share (building the log, loading the program).
#
#   bench/callgrind_report.sh [path/to/overhead_bench] [--with-ref | --batch1-data]
#
# prints tab-separated columns, a header line first: policy, batch and each variant's
# instructions per record. --with-ref adds the twin that reaches its parts through pointers
# (`handwritten_ref`, in overhead_split_bench only). --batch1-data prints, for batch 1 only, the
# data reads and writes per record beside the instructions (callgrind --cache-sim=yes): what kind
# of work an equal instruction count is, a line per policy and variant.
# bench/performance_report.sh keeps them in docs/data/ and makes the tables.
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

if [[ $with_ref == --batch1-data ]]; then
  events() {  # variant policy records -> "Ir Dr Dw"
    local out
    out=$(valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file=/dev/null "$bench" \
      --count "$1" "$2" 1 "$3" 2>&1) || {
      echo "callgrind_report: $bench --count $1 $2 1 $3 failed:" >&2
      echo "$out" >&2
      exit 1
    }
    awk '/Collected :/ { print $4, $5, $6 }' <<<"$out"
  }
  per_record3() {  # variant policy -> "Ir Dr Dw" per record (2 decimals)
    local a b
    a=$(events "$1" "$2" "$n1")
    b=$(events "$1" "$2" "$n2")
    awk -v a="$a" -v b="$b" -v n="$((n2 - n1))" 'BEGIN {
      split(a, x, " "); split(b, y, " ")
      printf "%.2f %.2f %.2f", (y[1] - x[1]) / n, (y[2] - x[2]) / n, (y[3] - x[3]) / n }'
  }
  # The split build has the referenced twin too: its figures follow the owned twin's. A binary
  # without it says so ("unknown variant"); any other failure stops the report.
  ref=false
  if probe=$("$bench" --count handwritten_ref AtMostOnce 1 1 2>&1); then
    ref=true
  elif [[ $probe != *"unknown variant"* ]]; then
    echo "callgrind_report: $bench --count handwritten_ref AtMostOnce 1 1 failed:" >&2
    echo "$probe" >&2
    exit 1
  fi
  variants=(pipeline handwritten)
  $ref && variants+=(handwritten_ref)
  printf 'policy\tvariant\tinstructions\tdata_reads\tdata_writes\n'
  for policy in AtMostOnce AtLeastOnce TransactionalPosition; do
    for variant in "${variants[@]}"; do
      # Through an assignment, which a failed run inside it stops (a here-string would not).
      row=$(per_record3 "$variant" "$policy")
      read -r ir dr dw <<<"$row"
      printf '%s\t%s\t%s\t%s\t%s\n' "$policy" "$variant" "$ir" "$dr" "$dw"
    done
  done
  exit 0
fi

variants=(pipeline handwritten raw_sink)
[[ $with_ref == --with-ref ]] && variants+=(handwritten_ref)
(IFS=$'\t'; echo "policy${IFS}batch${IFS}${variants[*]}")
for policy in AtMostOnce AtLeastOnce TransactionalPosition; do
  for batch in 1 64 512; do
    row="$policy"$'\t'"$batch"
    for variant in "${variants[@]}"; do
      n=$(per_record "$variant" "$policy" "$batch")
      row+=$'\t'"$n"
    done
    echo "$row"
  done
done
