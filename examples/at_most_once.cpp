// SPDX-License-Identifier: BSL-1.0
// AtMostOnce: poll -> commit position -> write. A crash between the commit and the write skips
// the unit, and nothing says so: the records are simply never applied.
#include <cstdio>
#include <set>

#include "orders.hpp"

using namespace example;

// A plain append table: every write is a new row, so nothing hides a duplicate (there are none)
// and every gap shows.
using orders_flat = co::memory::table<order_event, co::no_key, co::capabilities<>>;
using store = co::memory::position_store<>;
using policy = co::AtMostOnce<>;

int main() {
  const order_log log = make_orders();
  orders_flat table;
  store position;
  std::printf("%s: %s -> %s\n", policy::name.data(), "poll, commit position, write",
              co::guarantee_t<policy>::name.data());

  try {
    auto reader = log.make_reader();
    co::pipeline<order_log::reader, orders_flat, policy, co::with_store<store>,
                 co::with_faults<crash_after_second<co::step_kind::commit_position>>>
        consumer(reader, table, position, co::settings{.batch_size = 4});
    consumer.run();
  } catch (const co::injected_crash& c) {
    std::printf("crash right after committing position %lld, before its write\n",
                static_cast<long long>(c.at.unit_end.value()));
  }

  auto reader = log.make_reader();
  co::pipeline<order_log::reader, orders_flat, policy, co::with_store<store>> restarted(
      reader, table, position, co::settings{.batch_size = 4});
  std::printf("restart resumes at position %lld\n",
              static_cast<long long>(restarted.recover().value()));
  restarted.run();

  print_rows("orders_flat (append, one row per applied record):", table);
  std::printf("applied %zu of %zu records; position %lld\n", table.size(), log.records().size(),
              static_cast<long long>(position.load()->value()));
  // Reconcile against the log: which offsets never reached the table?
  std::set<long long> applied, lost;
  table.for_each([&](const auto& r) { applied.insert(r.source_offset.value()); });
  for (const auto& r : log.records()) {
    if (!applied.contains(r.source_offset.value()))
      lost.insert(r.source_offset.value());
  }
  std::printf("lost offsets:");
  for (long long o : lost)
    std::printf(" %lld", o);
  std::printf("  -- no error, no retry, no dead letter: only a reconciliation finds them\n");
  return lost == std::set<long long>{4, 5, 6, 7} && position.load() == co::position{12} ? 0 : 1;
}
