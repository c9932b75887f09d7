// SPDX-License-Identifier: BSL-1.0
// Real consumer groups on librdkafka's mock cluster: members joining and leaving, a zombie
// that stalls inside its transaction past max.poll.interval.ms, a group deleted and recreated
// (its generations restart), the cooperative protocol behind the close workaround, and
// AtLeastOnce with Kafka's committed offsets as the position store. Each
// member runs its pipeline on its own thread, into one shared table (one session each), under
// TransactionalPosition with the group generation (and the era) as the owner epoch.
//
// These wait for the mock's real timings: 3 s for a group's first join, session.timeout.ms - 1 s
// (3 s here) for every later rebalance.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace kafka_test;

namespace {

using policy_t = co::TransactionalPosition<>;
using source_t = kf::group_source<order, policy_t>;
using sink_t = shared_table<>::session;

/// Polls `done` until it holds or `limit` passes.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

/// Stalls the pipeline inside its transaction (after the unit's rows, before its position)
/// once armed, until released: a consumer frozen in a GC pause, a slow disk, a debugger.
struct stall final {
  std::atomic<bool>* armed = nullptr;
  std::atomic<bool>* stalled = nullptr;
  std::atomic<bool>* release = nullptr;
  void at(const co::fault_point& p) {
    if (armed == nullptr || p.where != co::fault_point::kind::after_step ||
        p.step != co::step_kind::write || !armed->exchange(false))
      return;
    stalled->store(true);
    const auto deadline = std::chrono::steady_clock::now() + 40s;
    while (!release->load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
  }
};

/// One member of the group, on its own thread.
template <class Faults = co::no_faults>
class member final {
 public:
  using pipeline_t = co::pipeline<source_t, sink_t, policy_t, co::with_faults<Faults>>;

  struct config {
    bool stop_when_fenced = true;
    kf::properties extra{};
    std::function<void(Faults&)> setup{};
  };

  member(const kf::mock_cluster& mc, shared_table<>& db, const std::string& group, config c)
      : db_(&db), config_(std::move(c)) {
    options_ = kf::consumer_options{.topic = "orders", .config = mc.group_config(group)};
    for (const auto& [k, v] : config_.extra)
      options_.config[k] = v;
    thread_ = std::thread([this] { run(); });
  }
  member(const kf::mock_cluster& mc, shared_table<>& db, const std::string& group)
      : member(mc, db, group, config{}) {}

  member(const member&) = delete;
  member& operator=(const member&) = delete;
  ~member() { stop(); }

  /// Leaves the group in good order (close: the revoke reaches the pipeline) and joins.
  void stop() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }

  [[nodiscard]] std::vector<co::partition_id> assignment() const {
    std::lock_guard lock(m_);
    return assignment_;
  }
  [[nodiscard]] std::optional<std::int32_t> generation() const {
    std::lock_guard lock(m_);
    return generation_;
  }
  [[nodiscard]] std::vector<co::fenced> fences() const {
    std::lock_guard lock(m_);
    return fences_;
  }
  [[nodiscard]] int session() const { return session_.load(); }
  [[nodiscard]] bool running() const { return !finished_.load(); }
  void check_no_failure() const {
    std::lock_guard lock(m_);
    if (failure_) {
      try {
        std::rethrow_exception(failure_);
      } catch (const std::exception& e) {
        FAIL_CHECK("the member failed: " << e.what());
      }
    }
  }
  /// True once it owns exactly `n` partitions at a generation of at least `g`.
  [[nodiscard]] bool owns(std::size_t n, std::int32_t g) const {
    std::lock_guard lock(m_);
    return assignment_.size() == n && generation_ && *generation_ >= g;
  }

 private:
  void run() {
    try {
      source_t src(options_);
      sink_t sink(*db_);
      session_.store(sink.id());
      pipeline_t p(src, sink, co::settings{.batch_size = 32});
      if constexpr (!std::is_same_v<Faults, co::no_faults>) {
        if (config_.setup)
          config_.setup(p.faults());
      }
      while (!stop_) {
        try {
          p.poll_once();
        } catch (const co::fenced& e) {
          {
            std::lock_guard lock(m_);
            fences_.push_back(e);
          }
          if (config_.stop_when_fenced)
            break;
          std::this_thread::sleep_for(20ms);
        }
        std::lock_guard lock(m_);
        assignment_ = src.assignment();
        generation_ = src.generation();
      }
      src.close();
    } catch (...) {
      std::lock_guard lock(m_);
      failure_ = std::current_exception();
    }
    finished_ = true;
  }

  shared_table<>* db_;
  config config_;
  kf::consumer_options options_;
  mutable std::mutex m_;
  std::vector<co::partition_id> assignment_;
  std::optional<std::int32_t> generation_;
  std::vector<co::fenced> fences_;
  std::exception_ptr failure_;
  std::atomic<int> session_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

bool all_read(const shared_table<>& db, const produced& sent) {
  for (const auto& [k, v] : sent.by_partition)
    if (db.position(k) != co::position{static_cast<std::int64_t>(v.size())})
      return false;
  return true;
}

/// 0 lost, 0 duplicated: every record produced was applied exactly once, in offset order per
/// partition; and the owner epochs of each partition only ever went up.
void reconcile(const shared_table<>& db, const produced& sent) {
  std::map<co::partition_id, std::vector<std::int64_t>> offsets;
  std::map<co::partition_id, co::epoch> last_epoch;
  std::size_t regressions = 0;
  for (const auto& a : db.history()) {
    offsets[a.partition].push_back(a.at.value());
    auto& e = last_epoch[a.partition];
    if (a.owner < e)
      ++regressions;
    e = a.owner;
  }
  std::size_t lost = 0;
  std::size_t duplicated = 0;
  for (const auto& [k, v] : sent.by_partition) {
    std::map<std::int64_t, int> seen;
    for (const std::int64_t o : offsets[k])
      ++seen[o];
    for (std::size_t i = 0; i < v.size(); ++i) {
      const int n = seen[static_cast<std::int64_t>(i)];
      lost += n == 0 ? 1 : 0;
      duplicated += n > 1 ? static_cast<std::size_t>(n - 1) : 0;
    }
    CHECK(std::is_sorted(offsets[k].begin(), offsets[k].end()));
    const auto owners = db.owners(k);
    CHECK(std::is_sorted(owners.begin(), owners.end()));
  }
  CHECK(lost == 0);
  CHECK(duplicated == 0);
  CHECK(regressions == 0);
  CHECK(db.absorbed() == 0);
  check_rows_match(db.rows(), sent);
}

}  // namespace

TEST_CASE("group: two members, a join and a leave -- nothing lost, nothing twice, epochs rise") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 4);
  shared_table<> db;
  produced sent;
  produce_orders(mc, "orders", 4, 400, 40, sent);

  member<> a(mc, db, "readers");
  REQUIRE(wait_until([&] { return a.owns(4, 2); }));
  const std::int32_t first = *a.generation();
  CHECK(first == 2);  // the mock's first generation

  member<> b(mc, db, "readers");
  produce_orders(mc, "orders", 4, 400, 40, sent);  // while the group rebalances
  REQUIRE(wait_until([&] { return a.owns(2, first + 1) && b.owns(2, first + 1); }));
  produce_orders(mc, "orders", 4, 400, 40, sent);
  REQUIRE(wait_until([&] { return all_read(db, sent); }));

  b.stop();  // leaves: its partitions are revoked, then the group gives them all to a
  REQUIRE(wait_until([&] { return a.owns(4, first + 2); }));
  produce_orders(mc, "orders", 4, 200, 40, sent);
  REQUIRE(wait_until([&] { return all_read(db, sent); }));
  a.stop();
  a.check_no_failure();
  b.check_no_failure();
  CHECK(a.fences().empty());
  CHECK(b.fences().empty());

  reconcile(db, sent);
  // Both members wrote, each at the generation it owned its partitions at, in era 0. (How many
  // generations the group went through depends on the machine: a member that misses a
  // heartbeat under load makes one more. The order of epochs is what matters, checked above.)
  std::set<int> writers;
  std::set<std::int64_t> epochs;
  for (const auto& w : db.history()) {
    writers.insert(w.session);
    epochs.insert(w.owner.value());
  }
  CHECK(writers == std::set<int>{a.session(), b.session()});
  CHECK(epochs.size() >= 2);
  CHECK(*epochs.begin() == co::epoch::of(0, first).value());
  for (int k = 0; k < 4; ++k)
    CHECK(db.owner(co::partition_id{k}) == co::epoch::of(0, *a.generation()));
}

TEST_CASE("group: a zombie stalled in its transaction past max.poll.interval.ms is fenced") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  shared_table<> db;
  produced sent;
  produce_orders(mc, "orders", 2, 100, 20, sent);

  std::atomic<bool> armed{false}, stalled{false}, release{false};
  member<stall> zombie(mc, db, "readers", {.setup = [&](stall& s) {
                         s = stall{&armed, &stalled, &release};
                       }});
  REQUIRE(wait_until([&] { return zombie.owns(2, 2) && all_read(db, sent); }));
  member<> heir(mc, db, "readers");
  REQUIRE(wait_until([&] { return zombie.owns(1, 3) && heir.owns(1, 3); }));
  const co::partition_id victim = zombie.assignment().front();
  const co::epoch zombie_epoch = co::epoch::of(0, *zombie.generation());
  REQUIRE(wait_until([&] { return db.owner(victim) == zombie_epoch; }));

  // The zombie takes a unit of its partition and freezes inside its transaction, its rows
  // written, its position not yet: it polls no more, and librdkafka gives its partition up.
  armed = true;
  produce_orders(mc, "orders", 2, 200, 20, sent);
  REQUIRE(wait_until([&] { return stalled.load(); }));
  const std::size_t before = db.history().size();
  // The heir is given the partition at a newer generation, claims it, and reads on.
  REQUIRE(wait_until([&] { return heir.owns(2, 4); }));
  const co::epoch heir_epoch = co::epoch::of(0, *heir.generation());
  REQUIRE(wait_until([&] { return db.owner(victim) == heir_epoch && all_read(db, sent); }));
  CHECK(db.history().size() > before);

  // It wakes up and goes on with its unit: the position write is fenced, and nothing of the
  // unit lands.
  release = true;
  REQUIRE(wait_until([&] { return !zombie.fences().empty(); }));
  const co::fenced f = zombie.fences().front();
  CHECK(f.mine() == zombie_epoch);
  CHECK(f.current() >= heir_epoch);  // the heir's (or a later generation's, on a slow machine)
  CHECK(f.partition() == victim);
  zombie.stop();
  heir.stop();
  zombie.check_no_failure();
  heir.check_no_failure();
  // Every write of the zombie's partition since the heir took it is the heir's.
  for (const auto& w : db.history())
    if (w.partition == victim && w.owner >= heir_epoch)
      CHECK(w.session == heir.session());
  std::size_t zombie_after_stall = 0;
  for (const auto& w : db.history())
    if (w.session == zombie.session() && w.owner == zombie_epoch && w.partition == victim &&
        w.at.value() >= 50)  // the records produced after the stall was armed
      ++zombie_after_stall;
  CHECK(zombie_after_stall == 0);
  reconcile(db, sent);
}

TEST_CASE(
    "group: deleted and recreated, its generation restarts -- fenced until the era is bumped") {
  shared_table<> db;
  produced sent;
  std::int32_t old_generation = 0;
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 2);
    produce_orders(old_cluster, "orders", 2, 200, 20, sent);
    member<> x(old_cluster, db, "readers");
    REQUIRE(wait_until([&] { return x.owns(2, 2); }));
    member<> y(old_cluster, db, "readers");
    REQUIRE(wait_until([&] { return x.owns(1, 3) && y.owns(1, 3) && all_read(db, sent); }));
    old_generation = *x.generation();
    REQUIRE(wait_until([&] {
      return db.owner(co::partition_id{0}) == co::epoch::of(0, old_generation) &&
             db.owner(co::partition_id{1}) == co::epoch::of(0, old_generation);
    }));
    x.stop();
    y.stop();
    x.check_no_failure();
    y.check_no_failure();
  }
  // The same topic and group on a new cluster: the same records, and more; the group's
  // generations start again from the first.
  kf::mock_cluster cluster;
  cluster.create_topic("orders", 2);
  {
    kf::producer<order> again(cluster.client_config(), "orders");
    for (const auto& [k, v] : sent.by_partition)
      for (const order& o : v)
        again.send(k, o);
    again.flush();
  }
  produce_orders(cluster, "orders", 2, 100, 20, sent);
  member<> z(cluster, db, "readers", {.stop_when_fenced = false});
  // An honest member, refused: its generation is below the epoch the old group stored.
  REQUIRE(wait_until([&] { return z.fences().size() >= 2; }));
  const co::fenced f = z.fences().front();
  CHECK(f.mine().era() == 0);
  CHECK(f.mine().generation() >= 2);  // the new group's first generation, 2 on the mock
  CHECK(f.mine() < f.current());
  CHECK(f.current() == co::epoch::of(0, old_generation));
  CHECK(std::string(f.what()).find("bump the stream's era") != std::string::npos);
  CHECK(z.assignment().empty());  // nothing was assigned: the assignment waits, re-delivered
  CHECK(!all_read(db, sent));

  // The operator's way out: the stream's era. The next delivery claims at (era 1, generation 2),
  // above everything the old group stored, and reads on from the stored positions.
  db.bump_era();
  REQUIRE(wait_until([&] { return all_read(db, sent); }));
  CHECK(z.owns(2, f.mine().generation()));  // the refused assignment, delivered again
  z.stop();
  z.check_no_failure();
  for (int k = 0; k < 2; ++k)
    CHECK(db.owner(co::partition_id{k}) == co::epoch::of(1, *z.generation()));
  reconcile(db, sent);
}

TEST_CASE("group: cooperative-sticky, a join and a leave, and a close that returns") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 4);
  shared_table<> db;
  produced sent;
  produce_orders(mc, "orders", 4, 400, 40, sent);
  const member<>::config cooperative{
      .extra = {{"partition.assignment.strategy", "cooperative-sticky"}}};

  member<> a(mc, db, "readers", cooperative);
  REQUIRE(wait_until([&] { return a.owns(4, 2) && all_read(db, sent); }));
  member<> b(mc, db, "readers", cooperative);
  produce_orders(mc, "orders", 4, 400, 40, sent);
  REQUIRE(wait_until([&] { return a.owns(2, 3) && b.owns(2, 3) && all_read(db, sent); }));
  // a kept two partitions across the rebalances, at the epoch it claimed them with.
  const auto started = std::chrono::steady_clock::now();
  b.stop();  // unsubscribe, drain, close: returns (librdkafka #4527 otherwise)
  CHECK(std::chrono::steady_clock::now() - started < 20s);
  REQUIRE(wait_until([&] { return a.owns(4, 3); }));
  produce_orders(mc, "orders", 4, 200, 40, sent);
  REQUIRE(wait_until([&] { return all_read(db, sent); }));
  a.stop();
  a.check_no_failure();
  b.check_no_failure();
  reconcile(db, sent);
}

namespace {

using alo_policy = co::AtLeastOnce<>;
using alo_table = shared_table<co::Replicated>;  // R9a: as durable as Kafka's offsets (declared)

/// A member whose positions are Kafka's committed offsets, under AtLeastOnce or AtMostOnce.
template <class Policy>
class offset_member final {
  using source = kf::group_source<order, Policy>;
  using pipeline =
      co::pipeline<source, alo_table::session, Policy, co::with_store<kf::offset_store>>;

 public:
  offset_member(const kf::mock_cluster& mc, alo_table& db, std::string group = "readers")
      : thread_([this, &mc, &db, group] { run(mc, db, group); }) {}
  offset_member(const offset_member&) = delete;
  offset_member& operator=(const offset_member&) = delete;
  ~offset_member() { stop(); }

  void stop() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }
  [[nodiscard]] bool owns(std::size_t n, std::int32_t g) const {
    std::lock_guard lock(m_);
    return assignment_.size() == n && generation_ && *generation_ >= g;
  }
  /// Commits the coordinator refused while the group rebalanced (pipeline::refused_commits).
  [[nodiscard]] std::size_t refused() const { return refused_.load(); }
  void check_no_failure() const {
    std::lock_guard lock(m_);
    if (failure_) {
      try {
        std::rethrow_exception(failure_);
      } catch (const std::exception& e) {
        FAIL_CHECK("the member failed: " << e.what());
      }
    }
  }

 private:
  void run(const kf::mock_cluster& mc, alo_table& db, const std::string& group) {
    try {
      source src(kf::consumer_options{.topic = "orders", .config = mc.group_config(group)});
      kf::offset_store store(src);
      alo_table::session sink(db);
      pipeline p(src, sink, store, co::settings{.batch_size = 32});
      while (!stop_) {
        // A commit refused during a rebalance does not come out of poll_once: it is the
        // world's (issue 21, item 7); the pipeline reads the unit again and counts it.
        p.poll_once();
        refused_ = p.refused_commits();
        std::lock_guard lock(m_);
        assignment_ = src.assignment();
        generation_ = src.generation();
      }
      src.close();
    } catch (...) {
      std::lock_guard lock(m_);
      failure_ = std::current_exception();
    }
  }

  mutable std::mutex m_;
  std::vector<co::partition_id> assignment_;
  std::optional<std::int32_t> generation_;
  std::exception_ptr failure_;
  std::atomic<std::size_t> refused_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

using alo_member = offset_member<alo_policy>;

/// Offsets applied per partition, and how often each.
std::map<co::partition_id, std::map<std::int64_t, int>> applied_offsets(const alo_table& db) {
  std::map<co::partition_id, std::map<std::int64_t, int>> seen;
  for (const auto& w : db.history())
    ++seen[w.partition][w.at.value()];
  return seen;
}

}  // namespace

TEST_CASE("group: AtLeastOnce with Kafka's offsets, checked by the coordinator -- nothing lost") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 4);
  alo_table db;
  produced sent;
  produce_orders(mc, "orders", 4, 400, 40, sent);
  const auto all_applied = [&] {
    std::map<co::partition_id, std::size_t> applied;
    for (const auto& w : db.history())
      ++applied[w.partition];
    for (const auto& [k, v] : sent.by_partition)
      if (applied[k] != v.size())
        return false;
    return true;
  };

  alo_member a(mc, db);
  REQUIRE(wait_until([&] { return a.owns(4, 2); }));
  alo_member b(mc, db);
  produce_orders(mc, "orders", 4, 400, 40, sent);
  REQUIRE(wait_until([&] { return a.owns(2, 3) && b.owns(2, 3); }));
  produce_orders(mc, "orders", 4, 400, 40, sent);
  REQUIRE(wait_until(all_applied));
  b.stop();
  REQUIRE(wait_until([&] { return a.owns(4, 4); }));
  produce_orders(mc, "orders", 4, 200, 40, sent);
  REQUIRE(wait_until(all_applied));
  a.stop();
  a.check_no_failure();
  b.check_no_failure();
  MESSAGE("commits refused during rebalances, read again: " << a.refused() + b.refused());

  // Every record applied once (a replay is absorbed by the guard, never applied twice), and
  // the group's committed offsets at the end of every partition.
  std::map<co::partition_id, std::map<std::int64_t, int>> seen;
  for (const auto& w : db.history())
    ++seen[w.partition][w.at.value()];
  for (const auto& [k, v] : sent.by_partition) {
    CHECK(seen[k].size() == v.size());
    for (const auto& entry : seen[k])
      CHECK(entry.second == 1);
  }
  check_rows_match(db.rows(), sent);
  kf::assigned_source<order, alo_policy> reader(
      kf::consumer_options{.topic = "orders", .config = mc.group_config("readers")},
      {co::partition_id{0}, co::partition_id{1}, co::partition_id{2}, co::partition_id{3}});
  kf::offset_store committed(reader);
  for (const auto& [k, v] : sent.by_partition)
    CHECK(committed.load(k) == co::position{static_cast<std::int64_t>(v.size())});
}

TEST_CASE_TEMPLATE(
    "group: a commit refused while the group rebalances is the world's -- the "
    "member goes on, nothing lost",
    Policy, co::AtLeastOnce<>, co::AtMostOnce<>) {
  // Issue 21, item 7: REBALANCE_IN_PROGRESS (and a generation a rebalance superseded) used to
  // come out of poll_once as commit_refused and stop a new user's consumer at its first
  // rebalance. Now the unit is read again -- its rows kept and absorbed (AtLeastOnce), or not
  // written (AtMostOnce) -- and pipeline::refused_commits() counts it.
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  alo_table db;
  produced sent;
  produce_orders(mc, "orders", 2, 200, 40, sent);
  const auto all_applied = [&] {
    const auto seen = applied_offsets(db);
    for (const auto& [k, v] : sent.by_partition) {
      const auto it = seen.find(k);
      if (it == seen.end() || it->second.size() != v.size())
        return false;
    }
    return true;
  };
  offset_member<Policy> m(mc, db);
  REQUIRE(wait_until([&] { return m.owns(2, 1); }));
  REQUIRE(wait_until(all_applied));
  mc.push_request_errors(kf::api::offset_commit, {RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS,
                                                  RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS,
                                                  RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION});
  for (int round = 0; round < 3; ++round) {
    produce_orders(mc, "orders", 2, 100, 40, sent);
    REQUIRE(wait_until(all_applied, 60s));
  }
  REQUIRE(wait_until([&] { return m.refused() == 3; }));
  kf::assigned_source<order, Policy> reader(
      kf::consumer_options{.topic = "orders", .config = mc.group_config("readers")},
      {co::partition_id{0}, co::partition_id{1}});
  kf::offset_store committed(reader);
  REQUIRE(wait_until([&] {
    for (const auto& [k, v] : sent.by_partition)
      if (committed.load(k) != co::position{static_cast<std::int64_t>(v.size())})
        return false;
    return true;
  }));
  m.stop();
  m.check_no_failure();
  CHECK(m.refused() == 3);
  // Nothing skipped, nothing applied twice (a replay is absorbed by the guard; under AtMostOnce
  // a refused unit was never written, so there is nothing to replay).
  for (const auto& [k, offsets] : applied_offsets(db)) {
    CHECK(offsets.size() == sent.by_partition[k].size());
    for (const auto& [at, times] : offsets)
      CHECK(times == 1);
  }
  check_rows_match(db.rows(), sent);
}
