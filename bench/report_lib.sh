# SPDX-License-Identifier: BSL-1.0
# shellcheck shell=bash
# Sourced by the report scripts in bench/, from the repository's root. docs/performance.md is
# written by hand except for its tables: a script puts each table between its markers,
#   <!-- NAME:begin -->
#   <!-- NAME:end -->
# and leaves every other line as it is. The figures behind the tables are kept in docs/data/
# (docs/data/README.md), so that REUSE=1 writes the tables and charts again without measuring.
# PERF_DOC and PERF_DATA point the scripts at another page and data folder, to try a script
# without touching the committed ones.
# shellcheck disable=SC2034 # read by the scripts that source this file
{
  perf_doc=${PERF_DOC:-docs/performance.md}
  perf_data=${PERF_DATA:-docs/data}
  reuse=${REUSE:-0}
}

# put_table NAME < markdown: stdin becomes the lines between NAME's markers in $perf_doc. Fails,
# changing nothing, on an empty stdin or unless the page has each marker once, begin first.
put_table() {
  local body
  body=$(cat)
  [[ -n $body ]] || { echo "$0: nothing to put between the $1 markers" >&2; return 1; }
  if ! BODY=$body awk -v b="<!-- $1:begin -->" -v e="<!-- $1:end -->" '
      $0 == b { ++nb; print; print ENVIRON["BODY"]; skip = 1; next }
      $0 == e { ++ne; if (!skip) bad = 1; skip = 0 }
      !skip { print }
      END { exit (nb == 1 && ne == 1 && !bad) ? 0 : 3 }' "$perf_doc" >"$perf_doc.new"; then
    rm -f "$perf_doc.new"
    echo "$0: $perf_doc needs one '<!-- $1:begin -->' line and one '<!-- $1:end -->' after it" >&2
    return 1
  fi
  mv "$perf_doc.new" "$perf_doc"
}

# md_table ALIGN < tsv: tab-separated lines, the header first, as a markdown table; ALIGN has a
# letter per column, l (left) or r (right).
md_table() {
  awk -F'\t' -v align="$1" '
    { row = "|"; for (i = 1; i <= NF; ++i) row = row " " $i " |"; print row }
    NR == 1 {
      row = "|"
      for (i = 1; i <= NF; ++i) row = row (substr(align, i, 1) == "r" ? "---:|" : "---|")
      print row
    }'
}

# run_table FILE: a run's "what<TAB>value" lines (docs/data/*-run.tsv) as a table.
run_table() { { printf 'run\t\n'; cat "$1"; } | md_table ll; }

# need_data FILE...: fails unless each file is there (REUSE=1 reads them).
need_data() {
  local f
  for f in "$@"; do
    [[ -s $f ]] || { echo "$0: no $f: run without REUSE=1 to measure" >&2; return 1; }
  done
}

machine() { echo "$(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)"; }
load_average() { cut -d' ' -f1-3 /proc/loadavg; }
now() { date -u +%Y-%m-%dT%H:%MZ; }
