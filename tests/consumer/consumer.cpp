// SPDX-License-Identifier: BSL-1.0
// A downstream program: it consumes commit_order the way another project would, runs a small
// TransactionalPosition pipeline over the in-memory parts and checks what the table holds.
// Built by both consumer tests (find_package on an installed tree, add_subdirectory). It has its
// own event type, not the tests' fixtures: it sees only what an installed package offers.
#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>
#include <cstdio>
#include <tuple>
#include <type_traits>

namespace co = commit_order;

namespace {

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};

using order_log = co::memory::log<order_event>;
using orders_flat =
    co::memory::table<order_event, co::key<&order_event::order_id>,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>;
using append_only = co::memory::table<order_event, co::no_key, co::capabilities<>>;
using policy = co::TransactionalPosition<>;

static_assert(std::is_same_v<co::guarantee_t<policy>, co::ExactlyOnceInSink>);
static_assert(co::can_make_pipeline<order_log, orders_flat, policy>);
static_assert(!co::can_make_pipeline<order_log, append_only, co::AtLeastOnce<>,
                                     co::with_store<co::memory::position_store<>>>,
              "the ordered duplicate does not compile");

int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "commit_order consumer: FAILED: %s\n", what);
    ++failures;
  }
}

std::int64_t total_of(const orders_flat& table, std::int64_t order_id) {
  const auto* stored = table.find(std::tuple<std::int64_t>{order_id});
  return stored == nullptr ? -1 : stored->row.total_cents;
}

}  // namespace

int main() {
  // Ten events over three orders; a later event of an order updates it.
  order_log log;
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(order_event{i % 3, 100 * i});

  orders_flat table;
  co::pipeline<order_log, orders_flat, policy> consumer(log, table, co::settings{.batch_size = 4});
  const std::size_t handled = consumer.run();

  check(handled == 10, "every record is handled");
  check(table.size() == 3, "one row per order");
  check(total_of(table, 0) == 900 && total_of(table, 1) == 700 && total_of(table, 2) == 800,
        "each order holds its last event");
  check(consumer.committed_position() == co::position{10}, "the position is past the last record");
  check(table.load_position() == co::position{10}, "the position is stored in the table");
  check(table.commits() == 1 + 3, "recovery, then one transaction per batch of four");

  if (failures != 0)
    return 1;
  std::puts("commit_order consumer: 10 records, 3 orders, position 10 stored with the rows");
  return 0;
}
