// SPDX-License-Identifier: BSL-1.0
// A week of crashes, measured (docs/failure-directions.md): a consumer at 2000 records/s
// committing every 5 s, one or two unclean shutdowns a week, under AtMostOnce<AutoCommit>,
// AtLeastOnce and TransactionalPosition.
//
//   week_of_crashes [--crashes-per-week=N] [--weeks=N] [--seed=N] [--downtime-s=N]
//
// Exits non-zero when a bound the types promise does not hold: auto-commit losing more than one
// commit interval's records in a crash, the other two losing anything, or the arithmetic and the
// real pipeline disagreeing.
#include "week_of_crashes.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace wc = week_of_crashes;

namespace {

std::string grouped(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string when(wc::time_point t) {
  const std::int64_t us = t.time_since_epoch().count();
  const std::int64_t s = us / 1'000'000;
  char buf[64];
  std::snprintf(buf, sizeof buf, "day %lld %02lld:%02lld:%02lld.%03lld",
                static_cast<long long>(s / 86400 + 1), static_cast<long long>(s / 3600 % 24),
                static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60),
                static_cast<long long>(us / 1000 % 1000));
  return buf;
}

bool flag(const char* arg, const char* name, const char** value) {
  const std::size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=')
    return false;
  *value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  wc::parameters p;
  for (int i = 1; i < argc; ++i) {
    const char* v = nullptr;
    if (flag(argv[i], "--crashes-per-week", &v)) {
      p.crashes_per_week = std::strtod(v, nullptr);
    } else if (flag(argv[i], "--weeks", &v)) {
      p.weeks = std::strtoll(v, nullptr, 10);
    } else if (flag(argv[i], "--seed", &v)) {
      p.seed = std::strtoull(v, nullptr, 0);
    } else if (flag(argv[i], "--downtime-s", &v)) {
      p.downtime_s = std::strtoll(v, nullptr, 10);
    } else {
      std::printf("usage: %s [--crashes-per-week=N] [--weeks=N] [--seed=N] [--downtime-s=N]\n",
                  argv[0]);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  if (p.weeks < 1 || p.crashes_per_week < 0 || p.downtime_s < 0) {
    std::printf("weeks must be >= 1, crashes and downtime >= 0\n");
    return 2;
  }

  const std::int64_t in_flight = p.batch();
  std::printf(
      "A week of crashes, in virtual time\n"
      "  %s records/s, a commit every %lld s: up to %s records in flight behind each commit.\n"
      "  %lld simulated week(s), %s records' worth of time; %lld unclean shutdown(s) at random\n"
      "  moments (%.3g a week, seed %llu), each followed by %lld s of downtime.\n\n",
      grouped(p.records_per_second).c_str(), static_cast<long long>(p.commit_interval_ms / 1000),
      grouped(in_flight).c_str(), static_cast<long long>(p.weeks),
      grouped(p.duration().count() / 1'000'000 * p.records_per_second).c_str(),
      static_cast<long long>(p.crashes()), p.crashes_per_week,
      static_cast<unsigned long long>(p.seed), static_cast<long long>(p.downtime_s));
  std::printf(
      "Method: the week's log is virtual (record i = account i %% 1000, seq i / 1000; the sink is\n"
      "keyed on both, so a lost record is a missing row). Each poll takes %s records (one\n"
      "commit interval) after a 0-%lld ms fetch latency; each row costs %lld us. Uneventful\n"
      "batches are accounted in arithmetic: every record written once, the position committed\n"
      "at the end of the batch, the auto-commit timer firing at the first record boundary an\n"
      "interval after its last commit. Every batch that contains a crash moment is run by the\n"
      "real commit_order::pipeline over a window of the log, recovered into the state the\n"
      "arithmetic gives; the fault injector kills it at the first fault point at or after the\n"
      "moment, and a fresh pipeline recovers after the downtime and runs to the next committed\n"
      "boundary. Losses and replays are measured in the window's real sink and store and\n"
      "compared with the arithmetic's prediction; the timer arithmetic is also checked against\n"
      "the real pipeline over consecutive batches.\n\n",
      grouped(in_flight).c_str(), static_cast<long long>(p.max_fetch_latency_us / 1000),
      static_cast<long long>(p.row_cost().count()));

  // The timer arithmetic against the real pipeline, from the week's first batch.
  const std::int64_t checked = wc::auto_commit_lane(p).validate_timer_model(wc::boundary{}, 40);
  std::printf("Timer model: %s\n\n", checked < 0
                                         ? "DISAGREES with the pipeline"
                                         : ("matches the pipeline's " + std::to_string(checked) +
                                            " auto-commits over 40 consecutive batches")
                                               .c_str());

  const wc::week_result w = wc::simulate(p);
  std::printf("| %-34s | %7s | %12s | %19s | %18s | %-27s |\n", "policy", "crashes", "records lost",
              "duplicates absorbed", "largest loss/crash", "final sink == expected");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(9, '-').c_str(),
              std::string(14, '-').c_str(), std::string(21, '-').c_str(),
              std::string(20, '-').c_str(), std::string(29, '-').c_str());
  bool ok = checked >= 0;
  for (const wc::policy_result& r : w.policies) {
    const std::string verdict =
        r.sink_as_expected() ? "yes"
                             : "no: " + grouped(r.records - r.rows) + " rows missing" +
                                   (r.bad_rows != 0 ? ", " + grouped(r.bad_rows) + " wrong" : "");
    std::printf("| %-34s | %7zu | %12s | %19s | %18s | %-27s |\n", r.policy.c_str(),
                r.crashes.size(), grouped(r.lost).c_str(), grouped(r.absorbed).c_str(),
                grouped(r.largest_loss).c_str(), verdict.c_str());
  }
  std::printf("\n");
  for (const wc::policy_result& r : w.policies) {
    std::printf(
        "%s (%s): %s records consumed, %lld window(s) through the real pipeline (%s "
        "records)%s\n",
        r.policy.c_str(), r.guarantee.c_str(), grouped(r.records).c_str(),
        static_cast<long long>(r.windows), grouped(r.window_records).c_str(),
        r.down_hits != 0 ? (", " + std::to_string(r.down_hits) +
                            " crash moment(s) fell while the consumer was down")
                               .c_str()
                         : "");
    for (const wc::crash_report& c : r.crashes) {
      std::printf("  crash at %s: written to %s, committed %s -> lost %s, replayed %s",
                  when(c.at).c_str(), grouped(c.written_to).c_str(), grouped(c.committed).c_str(),
                  grouped(c.lost).c_str(), grouped(c.replayed).c_str());
      if (c.redone != 0)
        std::printf(", rolled back and redone %s", grouped(c.redone).c_str());
      std::printf("\n");
    }
    for (const std::string& m : r.mismatches)
      std::printf("  MODEL MISMATCH: %s\n", m.c_str());
    ok = ok && r.mismatches.empty();
  }

  // The bounds the types promise.
  const wc::policy_result& auto_commit = w.policies[0];
  ok = ok && auto_commit.largest_loss <= in_flight;
  for (std::size_t i = 1; i < w.policies.size(); ++i)
    ok = ok && w.policies[i].lost == 0 && w.policies[i].sink_as_expected();
  std::printf(
      "\nBounds: auto-commit loses at most %s records per crash; the other two lose "
      "nothing: %s\n",
      grouped(in_flight).c_str(), ok ? "hold" : "VIOLATED");
  return ok ? 0 : 1;
}
