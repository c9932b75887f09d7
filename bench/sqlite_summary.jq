# Summarises sqlite_bench's JSON output (--benchmark_out_format=json): one line per case,
# tab-separated:
#   policy sync batch pairs library_rows_s handwritten_rows_s ratio q1 q3 cpu_ratio
#   library_q1 library_q3 handwritten_q1 handwritten_q3
# where the rows/s are the medians of each variant's repetitions (and their quartiles), `ratio` is the median of the
# pairs' ratios (library / hand-written rows/s: the k-th library repetition of a case against
# the k-th hand-written one, which ran right beside it), q1 and q3 that ratio's quartiles, and
# cpu_ratio the median of the pairs' ratios of rows per CPU second (what the process itself
# spent, free of the time it waited for fsync or for a core).

def median: sort | if length == 0 then null
  elif length % 2 == 1 then .[length / 2 | floor]
  else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def quantile(q): sort | if length == 0 then null else .[((length - 1) * q) | floor] end;

[.benchmarks[]
 | select(.run_type == "iteration")
 | (.run_name | capture("^(?<variant>[a-z_]+)/sqlite/(?<policy>[A-Za-z]+)/(?<sync>[A-Z]+)/batch:(?<batch>[0-9]+)"))
   + {rate: .items_per_second, cpu: .cpu_time}]
| group_by([.policy, .sync, (.batch | tonumber)])
| map(
    ([.[] | select(.variant == "pipeline")]) as $p
    | ([.[] | select(.variant == "handwritten")]) as $h
    | ([range(0; [($p | length), ($h | length)] | min)]) as $pairs
    | ([$pairs[] | $p[.].rate / $h[.].rate]) as $ratios
    | ([$pairs[] | $h[.].cpu / $p[.].cpu]) as $cpu
    | [.[0].policy, .[0].sync, .[0].batch, ($pairs | length),
       ([$p[].rate] | median), ([$h[].rate] | median),
       ($ratios | median), ($ratios | quantile(0.25)), ($ratios | quantile(0.75)),
       ($cpu | median),
       ([$p[].rate] | quantile(0.25)), ([$p[].rate] | quantile(0.75)),
       ([$h[].rate] | quantile(0.25)), ([$h[].rate] | quantile(0.75))])
| sort_by(.[0] != "TransactionalPosition", .[1] != "FULL", (.[2] | tonumber))
| .[]
| @tsv
