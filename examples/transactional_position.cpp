// SPDX-License-Identifier: BSL-1.0
// TransactionalPosition: poll -> begin -> upsert rows + store position -> commit. The rows and
// the position commit together; a crash anywhere leaves both or neither.
#include <cstdio>

#include "orders.hpp"

using namespace example;

using orders_flat =
    co::memory::table<order_event, order_key,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>;
using policy = co::TransactionalPosition<>;

int main() {
  const order_log log = make_orders();
  orders_flat table;
  std::printf("%s: %s -> %s\n", policy::name.data(), "poll, begin, write + store position, commit",
              co::guarantee_t<policy>::name.data());

  try {
    auto reader = log.make_reader();
    co::pipeline<order_log::reader, orders_flat, policy,
                 co::with_faults<crash_after_second<co::step_kind::store_position>>>
        consumer(reader, table, co::settings{.batch_size = 4});
    consumer.run();
  } catch (const co::injected_crash& c) {
    std::printf("crash after writing rows and staging position %lld, before the commit\n",
                static_cast<long long>(c.at.unit_end.value()));
  }
  std::printf("after the crash the table says position %lld, newest row from offset %lld\n",
              static_cast<long long>(table.load_position()->value()),
              static_cast<long long>(table.applied_watermark()->value()));

  auto reader = log.make_reader();
  co::pipeline<order_log::reader, orders_flat, policy, co::with_observer<co::counting_observer>>
      restarted(reader, table, co::settings{.batch_size = 4});
  std::printf("restart resumes at position %lld\n",
              static_cast<long long>(restarted.recover().value()));
  restarted.run();

  print_rows("orders_flat (rows and position in one transaction):", table);
  std::printf("rows %zu; replays absorbed %zu; position %lld\n", table.size(),
              restarted.observer().replays_absorbed,
              static_cast<long long>(table.load_position()->value()));
  return table.size() == 4 && restarted.observer().replays_absorbed == 0 &&
                 table.load_position() == co::position{12}
             ? 0
             : 1;
}
