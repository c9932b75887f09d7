// SPDX-License-Identifier: BSL-1.0
#include <cstdio>
#include <type_traits>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace co = commit_order;

struct order_event {
  long order_id, customer_id, total_cents;
};

// orders_flat: an upsert keyed on the event, guarded by the source offset, able to store the
// consumer's position in the same transaction as the rows.
using orders_flat =
    co::memory::table<order_event, co::key<&order_event::order_id>,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>;
using orders_log = co::memory::log<order_event>;

int main() {
  orders_log log;
  log.append({4711, 92, 129900});
  log.append({4711, 92, 119900});  // a later event updates the order

  orders_flat table;
  co::pipeline<orders_log, orders_flat, co::TransactionalPosition<>> consumer(log, table);
  consumer.run();

  // The guarantee is derived from the policy's step order, at compile time.
  static_assert(std::is_same_v<decltype(consumer)::guarantee, co::ExactlyOnceInSink>);
  std::printf("rows %zu, total %ld, position %lld\n", table.size(),
              table.find({4711})->row.total_cents,
              static_cast<long long>(table.load_position()->value()));

  // With a plain append table instead, AtLeastOnce does not compile:
  //   commit_order R3: this policy replays after a crash and the sink would store replays as
  //   duplicate rows -- make the sink Idempotent (keyed upsert) or DuplicatesHarmless
  return table.size() == 1 && table.load_position() == co::position{2} ? 0 : 1;
}
