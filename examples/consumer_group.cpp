// SPDX-License-Identifier: BSL-1.0
// A consumer group: three members share a 4-partition topic of order events and write one
// shared SQLite table, orders_flat (partition-scoped offset guard, positions per partition with
// the owner's epoch, all in one transaction: TransactionalPosition). Each member has its own
// sink and connection to the same database file, as separate processes would. Member B dies in
// the middle of a unit, and its partition moves; member C stalls past its session, the group
// moves on without it, and when C wakes up and writes, it is fenced and its unit rolls back. It
// prints who owned which partition at which epoch (as the database records it), and the
// reconciled table; it exits 1 if the table, the positions or the fencing are not as claimed.
#include <stdlib.h>  // mkdtemp (POSIX)

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

namespace co = commit_order;
namespace sq = commit_order::sqlite;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
};

// The topic stands for a broker's log: what it holds is durable (Synced), as rule R9c asks of a
// source whose positions the sink keeps durably.
using topic = co::memory::partitioned_log<order_event, co::Synced>;
using group = co::memory::group<order_event, co::Synced>;

// One table for every partition: beside its columns, a row remembers the partition and offset
// it came from (source_partition, source_offset), and the guard compares offsets of the same
// partition only.
struct orders_flat final
    : sq::table_layout<"orders_flat", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"customer_id", &order_event::customer_id>,
                                         sq::column<"total_cents", &order_event::total_cents>>> {};
// PartitionScoped, OffsetGuarded, and a fencing sink: positions and owner epochs per partition
// in commit_order_positions, every claim on record in commit_order_claims.
using orders_sink = sq::guarded_upsert_sink<orders_flat>;
using policy = co::TransactionalPosition<>;

constexpr std::size_t partitions = 4;
const sq::admin_options stream{.stream = "flatten", .topic = "orders"};

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
    co::pipeline<group::member_consumer, orders_sink, policy, co::with_faults<kill_switch>>;

/// A consumer process: its group membership, its source, its own connection to the shared
/// database, and its pipeline.
struct member {
  char name;
  group::member_id id;
  group::member_consumer source;
  orders_sink sink;
  member_pipeline pipeline;
  member(char n, group& g, const std::filesystem::path& db)
      : name(n)
      , id(g.join())
      , source(g.consumer_of(id))
      , sink(db,
             sq::sink_options{
                 .stream = stream.stream, .topic = stream.topic, .member = std::string(1, n)})
      , pipeline(source, sink, co::settings{.batch_size = 4}) {}
};

/// A fresh directory for the database, removed at the end.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "consumer_group.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::filesystem::filesystem_error("cannot create a scratch directory",
                                              std::make_error_code(std::errc::io_error));
    path = pattern;
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
};

/// Who owns each partition: the member the group gives it to now, and what the database
/// records — the epoch (era << 32 | generation) it was last claimed at, by whom, and its
/// committed position.
void print_owners(const char* when, const group& g, sq::stream_admin& admin,
                  const std::vector<const member*>& members) {
  std::printf("%s (generation %d)\n", when, g.generation());
  for (const sq::partition_state& s : admin.partitions()) {
    char owner = '-';
    for (const member* m : members)
      for (const co::partition_id q : g.assignment_of(m->id))
        owner = q == s.partition ? m->name : owner;
    std::printf("  p%d  group gives it to %c; claimed by %s at epoch %lld; position %lld\n",
                s.partition.value(), owner, s.owner_member.c_str(),
                static_cast<long long>(s.owner.value()),
                static_cast<long long>(s.stored ? s.stored->value() : 0));
  }
}

std::optional<co::position> stored(sq::stream_admin& admin, co::partition_id k) {
  for (const sq::partition_state& s : admin.partitions())
    if (s.partition == k)
      return s.stored;
  return std::nullopt;
}

int run(const std::filesystem::path& db) {
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

  group g(orders);
  auto a = std::make_unique<member>('A', g, db);
  auto b = std::make_unique<member>('B', g, db);
  auto c = std::make_unique<member>('C', g, db);
  // The operator's view of the same file: a third kind of connection, reading only.
  sq::stream_admin admin(db, stream);
  std::vector<const member*> all{a.get(), b.get(), c.get()};
  a->pipeline.poll_once();  // each claims its partitions inside its first poll
  b->pipeline.poll_once();
  c->pipeline.poll_once();
  print_owners("A, B and C joined: a range assignment", g, admin, all);

  // B dies after writing the rows of a unit, before its commit: the transaction goes with it
  // (its connection closes uncommitted, as a killed process's would).
  const co::partition_id p1{1};
  const std::optional<co::position> p1_before = stored(admin, p1);
  b->pipeline.faults().armed = true;
  bool b_killed = false;
  try {
    b->pipeline.poll_once();
  } catch (const co::injected_crash&) {
    b_killed = true;
  }
  const group::member_id b_id = b->id;
  all = {a.get(), c.get()};
  b.reset();
  const bool b_rolled_back = stored(admin, p1) == p1_before;
  std::printf("B killed mid-unit: its rows rolled back, p1 stays at position %lld\n",
              static_cast<long long>(p1_before ? p1_before->value() : 0));
  g.expire(b_id, true);  // its session times out: p1 moves
  a->pipeline.poll_once();
  c->pipeline.poll_once();
  print_owners("B's session expired: its partition moved", g, admin, all);

  // C stalls (a long pause) past its session: the group expires it without C knowing, and A
  // takes its partitions at a newer epoch, resuming where C's commits left them.
  c->pipeline.poll_once();  // C reads and commits a batch of p2 and p3 ...
  g.expire(c->id, false);
  a->pipeline.run();
  print_owners("C stalled and was expired (it does not know): A took everything", g, admin, all);

  // C wakes up and goes on with what it had: its next unit is fenced and rolled back.
  produce(2);
  const co::partition_id p2{2};
  const std::optional<co::position> p2_before = stored(admin, p2);
  bool fenced = false;
  try {
    c->pipeline.poll_once();
  } catch (const co::fenced& e) {
    fenced = e.mine() < e.current();
    std::printf("C (a zombie) fenced: partition %d, its epoch %lld, the owner's %lld\n",
                e.partition().value(), static_cast<long long>(e.mine().value()),
                static_cast<long long>(e.current().value()));
  }
  const bool c_rolled_back = stored(admin, p2) == p2_before;
  std::printf("p2's position is still %lld: nothing of C's unit was committed\n",
              static_cast<long long>(p2_before ? p2_before->value() : 0));
  g.tell(c->id);  // C learns it was expired: its next poll drops its assignment
  c->pipeline.poll_once();
  a->pipeline.run();
  print_owners("A drained the topic", g, admin, all);

  // Every claim on record, per partition in the order made: the epochs only rise.
  std::printf("claims on record (commit_order_claims):\n");
  bool epochs_rise = true;
  std::map<std::int32_t, co::epoch> last_claim;
  for (const sq::claim_record& r : admin.claims()) {
    std::printf("  p%d  epoch %lld  by %s\n", r.partition.value(),
                static_cast<long long>(r.owner.value()), r.owner_member.c_str());
    const auto it = last_claim.find(r.partition.value());
    epochs_rise = epochs_rise && (it == last_claim.end() || it->second < r.owner);
    last_claim[r.partition.value()] = r.owner;
  }

  // The reconciled table: every order holds its last event, every position is at its end.
  std::map<std::int64_t, std::int64_t> last;
  for (std::size_t k = 0; k < partitions; ++k)
    for (const auto& r : orders.records(co::partition_id{static_cast<std::int32_t>(k)}))
      last[r.event.order_id] = r.event.total_cents;
  std::printf("orders_flat:\n");
  bool table_ok = true;
  std::size_t rows = 0;
  auto q = admin.database().prepare(
      "SELECT order_id, total_cents, source_partition, source_offset FROM orders_flat "
      "ORDER BY order_id");
  while (q.step()) {
    ++rows;
    std::printf(
        "  order %lld  total %3lld  (partition %lld, offset %lld)\n",
        static_cast<long long>(q.column_int64(0)), static_cast<long long>(q.column_int64(1)),
        static_cast<long long>(q.column_int64(2)), static_cast<long long>(q.column_int64(3)));
    table_ok = table_ok && last[q.column_int64(0)] == q.column_int64(1);
  }
  table_ok = table_ok && rows == last.size();
  for (std::size_t k = 0; k < partitions; ++k) {
    const co::partition_id p{static_cast<std::int32_t>(k)};
    table_ok = table_ok && stored(admin, p) == orders.end(p);
  }
  std::printf("%zu orders, each at its last event; every partition's position at its end: %s\n",
              rows, table_ok ? "yes" : "NO");
  const bool ok = b_killed && b_rolled_back && fenced && c_rolled_back && epochs_rise && table_ok;
  if (!ok)
    std::printf(
        "NOT as claimed: B killed %d, B rolled back %d, C fenced %d, C rolled back %d, "
        "epochs rise %d\n",
        b_killed, b_rolled_back, fenced, c_rolled_back, epochs_rise);
  return ok ? 0 : 1;
}

int main() {
  scratch_dir dir;
  return run(dir.path / "orders.sqlite");
}
