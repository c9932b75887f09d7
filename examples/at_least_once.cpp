// SPDX-License-Identifier: BSL-1.0
// AtLeastOnce: poll -> write -> commit position. A crash between the write and the commit
// replays the unit; the keyed upsert, guarded by source offset, absorbs the replay.
#include <cstdio>

#include "orders.hpp"

using namespace example;

using orders_flat =
    co::memory::table<order_event, order_key, co::capabilities<co::Idempotent, co::OffsetGuarded>>;
using store = co::memory::position_store<>;
using policy = co::AtLeastOnce<>;

int main() {
  const order_log log = make_orders();
  orders_flat table;
  store position;
  std::printf("%s: %s -> %s\n", policy::name.data(), "poll, write, commit position",
              co::guarantee_t<policy>::name.data());

  try {
    auto reader = log.make_reader();
    co::pipeline<order_log::reader, orders_flat, policy, co::with_store<store>,
                 co::with_faults<crash_after_second<co::step_kind::write>>>
        consumer(reader, table, position, co::settings{.batch_size = 4});
    consumer.run();
  } catch (const co::injected_crash& c) {
    std::printf("crash right after writing the unit up to position %lld, before its commit\n",
                static_cast<long long>(c.at.unit_end.value()));
  }

  auto reader = log.make_reader();
  co::pipeline<order_log::reader, orders_flat, policy, co::with_store<store>,
               co::with_observer<co::counting_observer>>
      restarted(reader, table, position, co::settings{.batch_size = 4});
  std::printf("restart resumes at position %lld\n",
              static_cast<long long>(restarted.recover().value()));
  restarted.run();

  print_rows("orders_flat (keyed by order_id, guarded by source offset):", table);
  std::printf("rows %zu; replays absorbed %zu; rows written on restart %zu; position %lld\n",
              table.size(), restarted.observer().replays_absorbed,
              restarted.observer().rows_written, static_cast<long long>(position.load()->value()));
  return table.size() == 4 && restarted.observer().replays_absorbed == 4 &&
                 position.load() == co::position{12}
             ? 0
             : 1;
}
