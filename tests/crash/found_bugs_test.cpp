// SPDX-License-Identifier: BSL-1.0
// Library bugs the crash tests found, each kept as the smallest test that showed it, so it
// cannot come back.
#include <doctest/doctest.h>

#include "support/flaky.hpp"
#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
using letters = co::memory::dead_letters<order_event>;
// Ten records, one unit; records 2 and 5 each fail exactly once, then succeed.
order_log ten() {
  return make_log(10, 10);
}
std::map<co::offset, int> two_transient_failures() {
  return {{co::offset{2}, 1}, {co::offset{5}, 1}};
}
}  // namespace

// Bug 1. `retry<N>` promises each failed record N more attempts (options.hpp: "Retry a failed
// record up to N more times"). Under a transactional unit, process_unit used to keep one counter
// for the whole unit: record 2 failed and used the one retry, then record 5 failed on the re-run
// and found the budget spent, so the pipeline stopped although every record would have succeeded
// on its own retry. Found by the random schedules (COMMIT_ORDER_CRASH_SEED=12816162236550860954
// dead-lettered offset 32 after a single failure). Fixed: a retry count per failed offset.
TEST_CASE("fixed: TransactionalPosition retry gives every failed record its own retries") {
  order_log log = ten();
  guarded_tx_table table;
  flaky_sink<guarded_tx_table> sink{table, two_transient_failures()};
  co::pipeline<order_log, flaky_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_error_handling<co::retry<1>>>
      p(log, sink, co::settings{.batch_size = 10});
  CHECK_NOTHROW(p.run());
  CHECK(table.size() == 10);
}

// The same bug under dead_letter<1>: a record that failed once is diverted to the dead letters
// instead of being retried, although its retry would have succeeded.
TEST_CASE("fixed: TransactionalPosition dead_letter retries a record before diverting it") {
  order_log log = ten();
  guarded_tx_table table;
  letters dl;
  flaky_sink<guarded_tx_table> sink{table, two_transient_failures()};
  co::pipeline<order_log, flaky_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<1>>, co::with_dead_letters<letters>>
      p(log, sink, dl, co::settings{.batch_size = 10});
  p.run();
  CHECK(dl.letters().empty());
  CHECK(table.size() == 10);
}

// Control: the non-transactional policies retry per record, as documented.
TEST_CASE("control: AtLeastOnce retry gives every failed record its own retries") {
  order_log log = ten();
  guarded_table table;
  store st;
  flaky_sink<guarded_table> sink{table, two_transient_failures()};
  co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::retry<1>>>
      p(log, sink, st, co::settings{.batch_size = 10});
  CHECK_NOTHROW(p.run());
  CHECK(table.size() == 10);
}
