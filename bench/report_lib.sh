# SPDX-License-Identifier: BSL-1.0
# shellcheck shell=bash
# Sourced by the report scripts in bench/, from the repository's root. docs/performance.md is
# written by hand except for what the scripts measure: a script puts each measured part between
# its markers,
#   <!-- NAME:begin -->
#   <!-- NAME:end -->
# and leaves every other line as it is. PERF_DOC points the scripts at another page, to try a
# script without touching the committed one.
perf_doc=${PERF_DOC:-docs/performance.md}

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
