// SPDX-License-Identifier: BSL-1.0
// A consumer group into one SQLite table: members of a memory::group read a 4-partition
// memory::partitioned_log, each through its own pipeline, sink and connection (as separate
// processes would), and write into one shared table with their positions beside the rows.
// Members join, leave and expire; an expired member that is not told goes on as a zombie.
// The checker reconciles the table and the history against the log: every record's write
// committed exactly once (0 lost, 0 duplicate), the table holds every order's newest event,
// every zombie write after a takeover fenced with nothing of its unit committed, and the owner
// epoch and the position of each partition never go back.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace co = commit_order;
namespace sq = commit_order::sqlite;
using crash_lab::order_event;
using crash_lab::orders_flat;
using test_support::scratch_dir;

namespace {

constexpr std::int32_t partitions = 4;
using plog_t = co::memory::partitioned_log<order_event, co::Synced>;
using group_t = co::memory::group<order_event, co::Synced>;
// WAL + NORMAL: the schedules are about ownership, not power cuts, and a Synced commit would
// make each of them wait for thousands of fsyncs.
using base_sink = sq::guarded_upsert_sink<orders_flat, sq::wal_normal>;

co::partition_id part(std::int32_t k) {
  return co::partition_id{k};
}

/// (partition, offset) -> how many times a write of that record was committed.
using ledger_t = std::map<std::pair<std::int32_t, std::int64_t>, int>;

/// The real sink, keeping the books: the records whose rows a transaction applied count once
/// that transaction commits, never when it rolls back.
class audited_sink final : public base_sink {
 public:
  audited_sink(const std::filesystem::path& file, sq::sink_options options, ledger_t& ledger)
      : base_sink(file, std::move(options)), ledger_(&ledger) {}

  using base_sink::apply;
  co::write_outcome apply(co::partition_id k, co::offset o, const order_event& e) {
    const co::write_outcome r = base_sink::apply(k, o, e);
    if (r == co::write_outcome::applied)
      pending_.emplace_back(k.value(), o.value());
    return r;
  }
  void begin() {
    pending_.clear();
    base_sink::begin();
  }
  void commit() {
    base_sink::commit();
    for (const auto& p : pending_)
      ++(*ledger_)[p];
    pending_.clear();
  }
  void rollback() {
    pending_.clear();
    base_sink::rollback();
  }

 private:
  ledger_t* ledger_;
  std::vector<std::pair<std::int32_t, std::int64_t>> pending_;
};

using pipeline_t =
    co::pipeline<group_t::member_consumer, audited_sink, co::TransactionalPosition<>>;

struct member {
  member(group_t& g, group_t::member_id id, const std::filesystem::path& db, ledger_t& ledger,
         std::size_t batch)
      : id(id)
      , consumer(g.consumer_of(id))
      , sink(db,
             sq::sink_options{
                 .stream = "flatten", .topic = "orders", .member = "member-" + std::to_string(id)},
             ledger)
      , pipeline(consumer, sink, co::settings{.batch_size = batch}) {}

  group_t::member_id id;
  group_t::member_consumer consumer;
  audited_sink sink;
  pipeline_t pipeline;
  bool zombie = false;  ///< expired, not told
  bool gone = false;    ///< left or told it expired: its next poll gives its partitions up
};

struct row {
  order_event event;
  std::int64_t partition;
  std::int64_t source_offset;
  friend bool operator==(const row&, const row&) = default;
};

std::vector<row> rows_of(sq::connection& db) {
  auto q = db.prepare(
      "SELECT order_id, customer_id, total_cents, event_seq, source_partition, source_offset "
      "FROM orders_flat ORDER BY order_id");
  std::vector<row> out;
  while (q.step())
    out.push_back(
        row{order_event{q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)},
            q.column_int64(4), q.column_int64(5)});
  return out;
}

/// Orders keyed to partitions (order i in partition i % 4), `events` per order, interleaved.
plog_t orders_log(std::int64_t orders, std::int64_t events) {
  plog_t log(partitions);
  for (std::int64_t seq = 1; seq <= events; ++seq)
    for (std::int64_t id = 0; id < orders; ++id)
      log.append(part(static_cast<std::int32_t>(id % partitions)),
                 order_event{id, 100 + id % 7, id * 1000 + seq, seq});
  return log;
}

/// The rows, positions and owner epochs at one moment.
struct snapshot {
  std::vector<row> rows;
  std::vector<std::optional<co::position>> positions;
  std::vector<co::epoch> owners;
  friend bool operator==(const snapshot&, const snapshot&) = default;
};

/// Runs one group over one database and checks it as it goes.
class harness {
 public:
  harness(const plog_t& log, const std::filesystem::path& db, std::size_t batch)
      : log_(&log), group_(log), db_(db), batch_(batch), admin_(db, admin_options()) {}

  group_t::member_id join() {
    const auto id = group_.join();
    members_.push_back(std::make_unique<member>(group_, id, db_, ledger_, batch_));
    return id;
  }
  void leave(group_t::member_id id) {
    group_.leave(id);
    find(id).gone = true;
  }
  /// Expires `id` without telling it: it goes on with the partitions and epochs it had.
  void expire(group_t::member_id id) {
    group_.expire(id, false);
    find(id).zombie = true;
  }
  void tell(group_t::member_id id) {
    group_.tell(id);
    member& m = find(id);
    m.zombie = false;
    m.gone = true;
  }

  /// One poll of member `id`: a zombie's write after a takeover must be fenced and leave the
  /// table, the positions and the epochs exactly as they were. Returns the records handled.
  std::size_t poll(group_t::member_id id) {
    member& m = find(id);
    const snapshot before = take();
    std::size_t n = 0;
    try {
      n = m.pipeline.poll_once();
    } catch (const co::fenced& e) {
      REQUIRE(m.zombie);  // only a zombie is ever fenced
      CHECK(e.mine() < e.current());
      ++zombies_fenced_;
      CHECK(take() == before);
    }
    if (m.gone)
      std::erase_if(members_, [&](const auto& p) { return p->id == id; });
    check_monotonic(before);
    return n;
  }

  /// Tells every zombie, lets everyone go on until no member moves, and reconciles.
  void drain_and_reconcile() {
    for (const auto& m : members_)
      if (m->zombie)
        tell(m->id);
    for (bool moved = true; moved;) {
      moved = false;
      std::vector<group_t::member_id> ids;
      for (const auto& m : members_)
        ids.push_back(m->id);
      for (const auto id : ids)
        moved = poll(id) > 0 || moved;
    }
    reconcile();
  }

  [[nodiscard]] std::vector<group_t::member_id> active() const {
    std::vector<group_t::member_id> out;
    for (const auto& m : members_)
      if (!m->zombie && !m->gone)
        out.push_back(m->id);
    return out;
  }
  [[nodiscard]] std::vector<group_t::member_id> zombies() const {
    std::vector<group_t::member_id> out;
    for (const auto& m : members_)
      if (m->zombie)
        out.push_back(m->id);
    return out;
  }
  [[nodiscard]] std::vector<group_t::member_id> all() const {
    std::vector<group_t::member_id> out;
    for (const auto& m : members_)
      out.push_back(m->id);
    return out;
  }
  [[nodiscard]] int zombies_fenced() const noexcept { return zombies_fenced_; }
  [[nodiscard]] sq::stream_admin& admin() noexcept { return admin_; }
  [[nodiscard]] const group_t& group() const noexcept { return group_; }

 private:
  static sq::admin_options admin_options() {
    return sq::admin_options{.stream = "flatten", .topic = "orders"};
  }

  member& find(group_t::member_id id) {
    for (const auto& m : members_)
      if (m->id == id)
        return *m;
    FAIL("no such member");
    throw std::logic_error("unreachable");
  }

  snapshot take() {
    snapshot s;
    s.rows = rows_of(admin_.database());
    s.positions.assign(partitions, std::nullopt);
    s.owners.assign(partitions, co::epoch{0});
    for (const sq::partition_state& p : admin_.partitions()) {
      s.positions[static_cast<std::size_t>(p.partition.value())] = p.stored;
      s.owners[static_cast<std::size_t>(p.partition.value())] = p.owner;
    }
    return s;
  }

  // Per partition: the owner epoch and the stored position never go back.
  void check_monotonic(const snapshot& before) {
    const snapshot now = take();
    for (std::size_t k = 0; k < partitions; ++k) {
      CAPTURE(k);
      CHECK(before.owners[k] <= now.owners[k]);
      if (before.positions[k])
        CHECK((now.positions[k] && *before.positions[k] <= *now.positions[k]));
    }
  }

  void reconcile() {
    // Every record's write committed exactly once: none lost, none twice.
    std::size_t records = 0;
    std::map<std::int64_t, row> newest;
    for (std::int32_t k = 0; k < partitions; ++k) {
      CAPTURE(k);
      for (const auto& r : log_->records(part(k))) {
        ++records;
        CAPTURE(r.source_offset);
        CHECK(ledger_[{k, r.source_offset.value()}] == 1);
        newest[r.event.order_id] = row{r.event, k, r.source_offset.value()};
      }
    }
    CHECK(ledger_.size() == records);
    // The table: every order once, at its newest event, with where that event came from.
    std::vector<row> expected;
    for (const auto& [id, r] : newest)
      expected.push_back(r);
    CHECK(rows_of(admin_.database()) == expected);
    // Every partition's position is at its end.
    const auto parts = admin_.partitions();
    REQUIRE(parts.size() == partitions);
    for (const sq::partition_state& p : parts)
      CHECK(p.stored == log_->end(p.partition));
    // The claims on record rise per partition in the order they were made (by time, then by
    // epoch: two claims can share a millisecond).
    std::map<std::int32_t, std::vector<co::epoch>> claimed;
    for (const sq::claim_record& c : admin_.claims())
      claimed[c.partition.value()].push_back(c.owner);
    for (const auto& [k, epochs] : claimed)
      CHECK(std::is_sorted(epochs.begin(), epochs.end()));
  }

  const plog_t* log_;
  group_t group_;
  std::filesystem::path db_;
  std::size_t batch_;
  sq::stream_admin admin_;
  ledger_t ledger_;
  std::vector<std::unique_ptr<member>> members_;
  int zombies_fenced_ = 0;
};

}  // namespace

TEST_CASE("a consumer group into one SQLite table: joins, a leave, a zombie fenced") {
  scratch_dir dir;
  const plog_t log = orders_log(24, 10);  // 240 records, 60 per partition
  harness h(log, dir / "db.sqlite", 6);

  const auto a = h.join();
  CHECK(h.poll(a) == 4);  // a owns all four partitions at generation 1: one record of each
  CHECK(h.admin().partitions().size() == 4);
  const auto b = h.join();  // generation 2: a {0, 1}, b {2, 3}
  CHECK(h.poll(a) > 0);
  CHECK(h.poll(b) > 0);
  const auto c = h.join();  // generation 3: a {0}, b {1}, c {2, 3}
  for (const auto m : {a, b, c})
    h.poll(m);
  const auto b_epoch = h.admin().partitions()[1].owner;
  CHECK(b_epoch == co::epoch::of(0, 3));

  // b's session expires and nobody tells it (generation 4: a {0, 1}, c {2, 3}). Until a claims
  // partition 1, b's writes still commit: it is the owner the position row names.
  h.expire(b);
  CHECK(h.poll(b) > 0);
  CHECK(h.poll(a) > 0);  // a claims partitions 0 and 1 at generation 4
  CHECK(h.admin().partitions()[1].owner == co::epoch::of(0, 4));
  // Now every write of b is fenced, and nothing of its unit commits (checked in poll()).
  h.poll(b);
  h.poll(b);
  CHECK(h.zombies_fenced() == 2);

  h.tell(b);  // b learns it lost its partitions: its next poll stores nothing
  h.poll(b);
  h.leave(a);  // generation 6: c owns everything
  h.poll(a);
  const auto d = h.join();  // generation 7: c {0, 1}, d {2, 3}
  h.poll(d);
  h.drain_and_reconcile();
  CHECK(h.zombies_fenced() == 2);
  // Who owned what at which epoch, on record.
  const auto claims = h.admin().claims();
  CHECK(claims.size() >= 8);
  bool b_claimed = false;
  for (const sq::claim_record& r : claims)
    b_claimed = b_claimed || (r.owner_member == "member-2" && r.owner == b_epoch);
  CHECK(b_claimed);
}

TEST_CASE("a consumer group into one SQLite table: seeded schedules of joins, leaves, zombies") {
  int fenced = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    scratch_dir dir;
    const plog_t log = orders_log(20, 6);  // 120 records
    harness h(log, dir / "db.sqlite", 1 + rng() % 7);
    h.join();
    for (int step = 0; step < 80; ++step) {
      const auto active = h.active();
      const auto zombies = h.zombies();
      const auto pick = [&](const std::vector<group_t::member_id>& ids) {
        return ids[rng() % ids.size()];
      };
      switch (rng() % 10) {
        case 0:
          if (active.size() < 3)
            h.join();
          break;
        case 1:
          if (active.size() > 1)
            h.leave(pick(active));
          break;
        case 2:
          if (active.size() > 1)
            h.expire(pick(active));
          break;
        case 3:
          if (!zombies.empty())
            h.tell(pick(zombies));
          break;
        default:
          h.poll(pick(h.all()));
          break;
      }
    }
    h.drain_and_reconcile();
    fenced += h.zombies_fenced();
  }
  MESSAGE("zombie writes fenced across the schedules: " << fenced);
  CHECK(fenced > 0);
}
