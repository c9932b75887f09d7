// SPDX-License-Identifier: BSL-1.0
// A real thread pool behind the pipeline: many workers, transient failures, a crash with
// writes in flight. Built and run under ThreadSanitizer in CI (label `concurrency`).
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include <commit_order/thread_pool.hpp>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
// Fails each record's first attempt when its offset is a multiple of 7, then succeeds: a
// transient error, seen by whichever worker runs the record.
struct transient_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Concurrent, co::Volatile>;

  std::mutex mutex;
  guarded_table table;
  std::map<co::offset, int> attempts;
  std::atomic<int> failures{0};

  co::write_outcome apply(co::offset o, const order_event& e) {
    std::lock_guard lock(mutex);
    if (o.value() % 7 == 0 && attempts[o]++ == 0) {
      ++failures;
      throw std::runtime_error("transient failure at " + std::to_string(o.value()));
    }
    return table.apply(co::partition_id{0}, o, e);
  }
};

std::map<std::int64_t, std::int64_t> last_per_order(const order_log& log) {
  std::map<std::int64_t, std::int64_t> m;
  for (const auto& r : log.records())
    m[r.event.order_id] = r.event.total_cents;
  return m;
}
}  // namespace

TEST_CASE("four workers, out-of-order completion, transient failures: nothing lost") {
  const order_log log = make_log(20000, 613);
  transient_sink sink;
  store st;
  co::thread_pool pool(4);
  auto reader = log.make_reader();
  co::pipeline<order_log::reader, transient_sink, co::AtLeastOnce<>, co::with_store<store>,
               co::with_executor<co::thread_pool>, co::with_error_handling<co::retry<2>>>
      p(reader, sink, st, pool, co::settings{.batch_size = 64, .max_in_flight = 256});
  CHECK(p.run() == 20000);
  CHECK(st.load() == co::position{20000});
  CHECK(sink.failures.load() == 2858);  // offsets 0, 7, ..., 19999 - 19999 % 7
  std::map<std::int64_t, std::int64_t> got;
  sink.table.for_each([&](const auto& r) { got[r.row.order_id] = r.row.total_cents; });
  CHECK(got == last_per_order(log));  // the offset guard kept the newest event per order
}

namespace {
struct crash_after_units {
  std::size_t units = 0;
  std::size_t limit = 0;
  void at(const co::fault_point& p) {
    if (p.where == co::fault_point::kind::after_step && p.step == co::step_kind::write &&
        ++units == limit) {
      throw co::injected_crash{p};
    }
  }
};
}  // namespace

TEST_CASE("a crash with a pool still writing: the restart replays, nothing is lost") {
  const order_log log = make_log(5000, 101);
  transient_sink sink;
  store st;
  {
    co::thread_pool pool(3);
    auto reader = log.make_reader();
    co::pipeline<order_log::reader, transient_sink, co::AtLeastOnce<>, co::with_store<store>,
                 co::with_executor<co::thread_pool>, co::with_error_handling<co::retry<2>>,
                 co::with_faults<crash_after_units>>
        p(reader, sink, st, pool, co::settings{.batch_size = 50, .max_in_flight = 128});
    p.faults().limit = 40;
    CHECK_THROWS_AS(p.run(), co::injected_crash);
    // The pipeline waits for its in-flight writes when it goes away, like a process whose
    // last writes land after its last commit.
  }
  REQUIRE(st.load().has_value());
  CHECK(*st.load() <= co::position{2000});
  co::thread_pool pool(3);
  auto reader = log.make_reader();
  co::pipeline<order_log::reader, transient_sink, co::AtLeastOnce<>, co::with_store<store>,
               co::with_executor<co::thread_pool>, co::with_error_handling<co::retry<2>>>
      restarted(reader, sink, st, pool, co::settings{.batch_size = 50, .max_in_flight = 128});
  restarted.run();
  CHECK(st.load() == co::position{5000});
  std::map<std::int64_t, std::int64_t> got;
  sink.table.for_each([&](const auto& r) { got[r.row.order_id] = r.row.total_cents; });
  CHECK(got == last_per_order(log));
}
