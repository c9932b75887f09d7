// SPDX-License-Identifier: BSL-1.0
// Crash enumeration of the concurrent mode: AtLeastOnce with writes handed to an executor,
// crashed at every fault point of the pipeline's thread, under many completion orders of the
// writes in flight. Whatever completed, whatever was cut off: after a restart nothing is lost
// and no row goes back to an older event.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <random>

#include <commit_order/adapters/memory/manual_executor.hpp>
#include <commit_order/adapters/memory/synchronized.hpp>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
using concurrent_table = co::memory::synchronized<guarded_table>;
using executor = co::memory::manual_executor;

struct counting_faults {
  std::size_t seen = 0;
  void at(const co::fault_point&) { ++seen; }
};
struct crash_at {
  std::size_t at_point = 0;
  std::size_t seen = 0;
  void at(const co::fault_point& p) {
    if (seen++ == at_point)
      throw co::injected_crash{p};
  }
};

template <class Faults>
using pipeline_t =
    co::pipeline<order_log, concurrent_table, co::AtLeastOnce<>, co::with_store<store>,
                 co::with_executor<executor>, co::with_faults<Faults>>;

// Runs a random subset of the pending writes, in a random order.
void complete_some(executor& ex, std::mt19937_64& rng) {
  std::size_t n = ex.pending() == 0 ? 0 : rng() % (ex.pending() + 1);
  while (n-- > 0)
    ex.run(rng() % ex.pending());
}

std::map<std::int64_t, std::int64_t> last_per_order(const order_log& log) {
  std::map<std::int64_t, std::int64_t> m;
  for (const auto& r : log.records())
    m[r.event.order_id] = r.event.total_cents;
  return m;
}
}  // namespace

TEST_CASE("every fault point x many completion orders: no loss, no regression") {
  std::size_t scenarios = 0;
  for (const std::size_t batch : {std::size_t{1}, std::size_t{3}, std::size_t{5}}) {
    const order_log reference = make_log(13, 4);
    // How many fault points does a clean run pass?
    std::size_t points = 0;
    {
      order_log log = make_log(13, 4);
      concurrent_table table;
      store st;
      executor ex;
      pipeline_t<counting_faults> p(log, table, st, ex, co::settings{.batch_size = batch});
      std::mt19937_64 rng(1);
      while (p.poll_once() != 0)
        complete_some(ex, rng);
      points = p.faults().seen;
    }
    REQUIRE(points > 0);
    for (std::size_t point = 0; point < points; ++point) {
      for (std::uint64_t seed = 0; seed < 12; ++seed) {
        CAPTURE(batch);
        CAPTURE(point);
        CAPTURE(seed);
        std::mt19937_64 rng(seed);
        order_log log = make_log(13, 4);
        concurrent_table table;
        store st;
        {
          executor ex;
          pipeline_t<crash_at> p(log, table, st, ex, co::settings{.batch_size = batch});
          p.faults().at_point = point;
          try {
            while (p.poll_once() != 0)
              complete_some(ex, rng);
          } catch (const co::injected_crash&) {
          }
          complete_some(ex, rng);  // some writes land after the crash point...
          ex.discard();            // ...the rest die with the process
        }
        executor ex;
        co::pipeline<order_log, concurrent_table, co::AtLeastOnce<>, co::with_store<store>,
                     co::with_executor<executor>>
            restarted(log, table, st, ex, co::settings{.batch_size = batch});
        restarted.run();
        std::map<std::int64_t, std::int64_t> got;
        table.inner().for_each([&](const auto& r) { got[r.row.order_id] = r.row.total_cents; });
        REQUIRE(got == last_per_order(reference));  // nothing lost, nothing regressed
        REQUIRE(st.load() == co::position{13});
        ++scenarios;
      }
    }
  }
  MESSAGE("concurrent crash scenarios: " << scenarios);
  CHECK(scenarios > 100);
}
