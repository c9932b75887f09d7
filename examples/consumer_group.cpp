// SPDX-License-Identifier: BSL-1.0
// A consumer group: three members share a 4-partition topic of order events and write one
// shared orders_flat table (partition-scoped offset guard, positions per partition with the
// owner's epoch, all in one transaction: TransactionalPosition). Member B dies in the middle of
// a unit, and its partition moves; member C stalls past its session, the group moves on without
// it, and when C wakes up and writes, it is fenced and its unit rolls back. It prints who owned
// which partition at which epoch, and the reconciled table.
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace co = commit_order;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
};

using order_key = co::key<&order_event::order_id>;
using topic = co::memory::partitioned_log<order_event>;
using group = co::memory::group<order_event>;
// One table for every partition: a row remembers the partition and offset it came from, and
// the guard compares offsets of the same partition only.
using orders_flat = co::memory::table<
    order_event, order_key,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>>;
using policy = co::TransactionalPosition<>;

constexpr std::size_t partitions = 4;

/// Crashes the member (like SIGKILL) after the rows of its next unit are written, before the
/// transaction commits: when armed.
struct kill_switch {
  bool armed = false;
  void at(const co::fault_point& p) {
    if (armed && p.step == co::step_kind::store_position) {
      armed = false;
      throw co::injected_crash{p};
    }
  }
};

using member_pipeline =
    co::pipeline<group::member_consumer, orders_flat, policy, co::with_faults<kill_switch>>;

/// A consumer process: its group membership, its source and its pipeline.
struct member {
  char name;
  group::member_id id;
  group::member_consumer source;
  member_pipeline pipeline;
  member(char n, group& g, orders_flat& table)
      : name(n)
      , id(g.join())
      , source(g.consumer_of(id))
      , pipeline(source, table, co::settings{.batch_size = 4}) {}
};

/// Who owns each partition now, as the table records it: the member the group gave it to and
/// the epoch that member claimed it at (era << 32 | generation).
void print_owners(const char* when, const group& g, const orders_flat& table,
                  const std::vector<const member*>& members) {
  std::printf("%s (generation %d)\n", when, g.generation());
  for (std::size_t k = 0; k < partitions; ++k) {
    const co::partition_id p{static_cast<std::int32_t>(k)};
    char owner = '-';
    for (const member* m : members)
      for (const co::partition_id q : g.assignment_of(m->id))
        owner = q == p ? m->name : owner;
    const std::optional<co::position> at = table.load_position(p);
    std::printf("  p%zu  owner %c  claimed at epoch %lld  position %lld\n", k, owner,
                static_cast<long long>(table.owner(p).value()),
                static_cast<long long>(at ? at->value() : 0));
  }
}

int main() {
  // Orders 100-103 live on p0, 200-203 on p1, and so on; each event sets an order's total.
  topic orders(partitions);
  std::int64_t total = 0;
  auto produce = [&](std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < partitions; ++k)
        orders.append(co::partition_id{static_cast<std::int32_t>(k)},
                      order_event{static_cast<std::int64_t>(k + 1) * 100 + i % 4,
                                  static_cast<std::int64_t>(k), ++total});
  };
  produce(6);

  orders_flat table;
  group g(orders);
  member a('A', g, table), b('B', g, table), c('C', g, table);
  const std::vector<const member*> all{&a, &b, &c};
  a.pipeline.poll_once();  // each claims its partitions inside its first poll
  b.pipeline.poll_once();
  c.pipeline.poll_once();
  print_owners("A, B and C joined: a range assignment", g, table, all);

  // B dies after writing the rows of a unit, before its commit: the transaction goes with it.
  b.pipeline.faults().armed = true;
  try {
    b.pipeline.poll_once();
  } catch (const co::injected_crash&) {
    std::printf("B killed mid-unit: its rows rolled back, p1 stays at position %lld\n",
                static_cast<long long>(table.load_position(co::partition_id{1})->value()));
  }
  g.expire(b.id, true);  // its session times out: p1 moves
  a.pipeline.poll_once();
  c.pipeline.poll_once();
  print_owners("B's session expired: its partition moved", g, table, all);

  // C stalls (a long pause) past its session: the group expires it without C knowing, and A
  // takes its partitions at a newer epoch, resuming where C's commits left them.
  c.pipeline.poll_once();  // C reads and commits a batch of p2 and p3 ...
  g.expire(c.id, false);
  a.pipeline.run();
  print_owners("C stalled and was expired (it does not know): A took everything", g, table, all);

  // C wakes up and goes on with what it had: its next unit is fenced and rolled back.
  produce(2);
  const co::position p2_before = table.load_position(co::partition_id{2}).value();
  bool fenced = false;
  try {
    c.pipeline.poll_once();
  } catch (const co::fenced& e) {
    fenced = true;
    std::printf("C (a zombie) fenced: partition %d, its epoch %lld, the owner's %lld\n",
                e.partition().value(), static_cast<long long>(e.mine().value()),
                static_cast<long long>(e.current().value()));
  }
  const bool rolled_back = table.load_position(co::partition_id{2}) == p2_before;
  std::printf("p2's position is still %lld: nothing of C's unit was committed\n",
              static_cast<long long>(p2_before.value()));
  g.tell(c.id);  // C learns it was expired: its next poll drops its assignment
  c.pipeline.poll_once();
  a.pipeline.run();
  print_owners("A drained the topic", g, table, all);

  // The reconciled table: every order holds its last event, every position is at its end.
  std::printf("orders_flat:\n");
  bool ok = fenced && rolled_back;
  std::map<std::int64_t, std::int64_t> last;
  for (std::size_t k = 0; k < partitions; ++k)
    for (const auto& r : orders.records(co::partition_id{static_cast<std::int32_t>(k)}))
      last[r.event.order_id] = r.event.total_cents;
  table.for_each([&](const auto& r) {
    std::printf("  order %lld  total %3lld  (partition %d, offset %lld)\n",
                static_cast<long long>(r.row.order_id), static_cast<long long>(r.row.total_cents),
                r.source_partition.value(), static_cast<long long>(r.source_offset.value()));
    ok = ok && last[r.row.order_id] == r.row.total_cents;
  });
  for (std::size_t k = 0; k < partitions; ++k) {
    const co::partition_id p{static_cast<std::int32_t>(k)};
    ok = ok && table.load_position(p) == orders.end(p);
  }
  ok = ok && table.size() == last.size();
  std::printf("%zu orders, each at its last event; every partition's position at its end: %s\n",
              table.size(), ok ? "yes" : "NO");
  return ok ? 0 : 1;
}
