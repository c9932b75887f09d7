// SPDX-License-Identifier: BSL-1.0
// Random schedules: crashes at random fault points, sink failures under every error handling,
// and retention while the consumer is down, over every legal policy x sink, with invariants that
// hold whatever the schedule did. The schedules and their invariants are the testing kit's
// (commit_order/testing/schedules.hpp), run over the four memory sinks with logs of 20-40
// records over 3-6 keys.
//
// PRNG: std::mt19937_64 (its output sequence is fixed by the standard); draws are `rng() % n`,
// not std::uniform_int_distribution, whose algorithm differs between standard libraries. Each
// schedule has its own seed, splitmix64(base seed + its index); the schedules are shared out
// among the sinks in proportion to their legal configurations, each sink taking the next run of
// indices, so every index runs once.
//
//   COMMIT_ORDER_CRASH_SCHEDULES=N    run N schedules (default 10000)
//   COMMIT_ORDER_CRASH_BASE_SEED=S    derive the schedules' seeds from S instead of the default
//   COMMIT_ORDER_CRASH_SEED=S         run the schedule with seed S over each sink (a failure
//                                     prints its seed; COMMIT_ORDER_CONFORMANCE_SEED=S, as the
//                                     kit names it, does the same)
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "crash/crash_support.hpp"

namespace co = commit_order;
using namespace crash;

TEST_CASE("random schedules: crashes, sink failures and retention never break the guarantee") {
  ct::conformance_options o = ct::with_environment({});
  o.schedule_count = 10000;
  o.schedule_records_min = 20;
  o.schedule_records_max = 40;
  o.schedule_keys_min = 3;
  o.schedule_keys_max = 6;
  if (const auto n = ct::environment_number("COMMIT_ORDER_CONFORMANCE_SCHEDULES"))
    o.schedule_count = static_cast<std::size_t>(*n);
  if (const auto n = ct::environment_number("COMMIT_ORDER_CRASH_SCHEDULES"))
    o.schedule_count = static_cast<std::size_t>(*n);
  if (const auto s = ct::environment_number("COMMIT_ORDER_CRASH_BASE_SEED"))
    o.base_seed = *s;
  if (const auto s = ct::environment_number("COMMIT_ORDER_CRASH_SEED"))
    o.seed = *s;

  // 25 legal policy x sink combinations, each under stop, retry and dead_letter.
  std::size_t configs = 0;
  ct::detail::for_each_type(all_fixtures{}, [&]<class F>(std::type_identity<F>) {
    configs += ct::detail::legal_schedule_configs<F>().size();
  });
  REQUIRE(configs == 25 * 3);

  const std::size_t total = o.schedule_count;
  std::size_t next = 0, shared = 0;  // schedules handed out, configurations so far
  std::map<std::string, std::size_t> sum;
  std::vector<std::string> failed;
  ct::detail::for_each_type(all_fixtures{}, [&]<class F>(std::type_identity<F>) {
    const std::size_t mine = ct::detail::legal_schedule_configs<F>().size();
    shared += mine;
    ct::conformance_options of = o;
    of.base_seed = o.base_seed + next;
    of.schedule_count = total * shared / configs - next;
    next += of.schedule_count;
    ct::report r;
    r.adapter = name_of(kind_of_v<F>);
    ct::run_random_schedules<F>(r, of);
    const ct::check_report& c = r.checks.front();
    std::cout << r.summary();
    for (const auto& [figure, value] : c.measured)
      sum[figure] += value;
    if (!o.seed && total >= 10000) {
      // Every configuration of the sink completed a schedule.
      CHECK(c.measured.at("configurations reached") == c.measured.at("configurations"));
      // The transactional log's read_uncommitted reader was shown aborted attempts, and both of
      // its readers were held to one log after every life.
      if constexpr (ct::fixture_traits<F>::has_uncommitted_view)
        CHECK(c.measured.at("aborted attempts shown") > 0);
    }
    for (const std::string& f : r.failure_descriptions())
      failed.push_back(f);
  });

  std::cout << "random schedules: " << sum["schedules"] << " schedules over "
            << sum["configurations reached"] << " configurations, " << sum["lives"]
            << " pipeline lives; " << sum["crashes"] << " crashes, " << sum["record failures"]
            << " failed records stopped a pipeline, " << sum["dead-lettered"] << " dead-lettered, "
            << sum["retention runs"] << " retention runs of which " << sum["positions lost"]
            << " overtook the stored position (position_lost, as expected); " << sum["records lost"]
            << " records lost (all under AtMostOnce, each inside the unit in flight at a crash or "
               "failed record), "
            << sum["records replayed"] << " replayed\n";
  if (!o.seed && total >= 10000) {
    // Enough schedules reach every configuration and every kind of event.
    CHECK(sum["configurations reached"] == configs);
    CHECK(sum["crashes"] > 0);
    CHECK(sum["record failures"] > 0);
    CHECK(sum["dead-lettered"] > 0);
    CHECK(sum["positions lost"] > 0);
    CHECK(sum["retention runs"] > sum["positions lost"]);
    CHECK(sum["records lost"] > 0);
    CHECK(sum["records replayed"] > 0);
  }
  MESSAGE(sum["schedules"] << " random schedules, " << failed.size() << " failed");
  for (std::size_t i = 0; i < failed.size() && i < 10; ++i)
    FAIL_CHECK(failed[i]);
  CHECK(failed.empty());
}
