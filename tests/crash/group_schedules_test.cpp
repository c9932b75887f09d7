// SPDX-License-Identifier: BSL-1.0
// Random schedules of a consumer group: 2-4 members of a memory::group consume a 4-partition
// memory::partitioned_log into one shared table (PartitionScoped, Transactional) through random
// joins, leaves, expiries with and without telling (zombies that go on polling and writing),
// tells, crashes at random fault points and inside the claim (then a fresh pipeline), appends,
// and retention of single partitions; under the eager and the cooperative protocol.
//
// What every schedule is held to, checked as it happens and against a model at the end:
//  - position_lost exactly when due: a partition whose stored position retention overtook is
//    refused when it is assigned, and a member whose read position it overtook gets
//    position_lost from its poll, never a jump; otherwise neither. The operator then
//    acknowledges the gap (resets the partition's position to its earliest record, the
//    explicit act, never automatic), and the records in it are not due.
//  - a partition always starts exactly at its stored position, and reads on without a gap;
//  - TransactionalPosition: every claim committed at an epoch no lower than the partition's
//    last (one epoch, one member); every position written at the partition's claimed epoch,
//    never below the one committed before; every committed row covered by a position of its
//    partition in the same transaction; a fenced unit is a zombie's, and rolls back; every due
//    record applied exactly once; zombie units fenced and rolled back > 0 over the run.
//  - AtLeastOnce (positions in a partitioned memory::position_store, which cannot fence): every
//    due record applied at least once and no record's row applied twice (replays are absorbed
//    by the partition-scoped guard); a position only ever goes back after a zombie committed
//    one for that partition (counted: the price of a store without fencing).
//  - the final table: one row per account, holding the last event of the account the consumers
//    received (with every due record received), and every partition's position at its end.
//
// PRNG and seeds as in schedules_test.cpp:
//   COMMIT_ORDER_CRASH_SCHEDULES=N    run N schedules (default 10000)
//   COMMIT_ORDER_CRASH_BASE_SEED=S    derive the schedules' seeds from S instead of the default
//   COMMIT_ORDER_CRASH_SEED=S         run the single schedule with seed S (printed on failure)
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "crash/crash_support.hpp"

namespace co = commit_order;
using namespace crash;

namespace {

constexpr std::uint64_t default_base_seed = 0x6A0F5EED5C4EDULL;
constexpr std::size_t partitions = 4;

using ct::environment_number;
using ct::detail::never;
using ct::detail::policy_name;
using ct::detail::splitmix64;

/// Accounts never move between partitions (a key that did would be `key_moved_partition`, an
/// error of the stream, not of a crash): partition k's are k * 1000 + a.
std::int64_t account_of(co::partition_id k, std::int64_t a) {
  return static_cast<std::int64_t>(k.value()) * 1000 + a;
}

/// One update of an account (`key`); `seq` counts the account's updates.
using account_event = kit_event;
using account_key = kit_key;
using topic = co::memory::partitioned_log<account_event>;
using group_t = co::memory::group<account_event>;
/// The shared table: keyed, guarded per partition, positions per partition in its transaction.
using table_t = co::memory::table<account_event, account_key, p_transactional_caps>;
using store_t = co::memory::position_store<>;

co::partition_id part(std::size_t k) {
  return co::partition_id{static_cast<std::int32_t>(k)};
}

/// Not a std::exception: nothing in the pipeline may mistake a failed check for a record's
/// failure; it leaves through every layer to the schedule's runner.
struct schedule_failure {
  std::string what;
};

struct totals {
  std::size_t schedules = 0;
  std::size_t cooperative = 0;
  std::size_t steps = 0;
  std::size_t polls = 0;
  std::size_t records_polled = 0;
  std::size_t joins = 0;
  std::size_t leaves = 0;
  std::size_t expired_told = 0;
  std::size_t expired_untold = 0;  ///< zombies made
  std::size_t tells = 0;
  std::size_t crashes_at_points = 0;
  std::size_t crashes_in_claim = 0;
  std::size_t retention_runs = 0;
  std::size_t appends = 0;
  std::size_t claims = 0;                  ///< claims committed (TransactionalPosition)
  std::size_t positions_written = 0;       ///< position writes committed (sink or store)
  std::size_t lost_at_claim = 0;           ///< position_lost as a partition was assigned, as due
  std::size_t lost_at_poll = 0;            ///< position_lost from a member's poll, as due
  std::size_t acknowledged = 0;            ///< gaps the operator acknowledged
  std::size_t records_deleted_unread = 0;  ///< records in acknowledged gaps
  std::size_t zombie_units_fenced = 0;
  std::size_t zombie_rows_rolled_back = 0;
  std::size_t zombie_claims_fenced = 0;    ///< a zombie's claim at its old epoch, refused
  std::size_t zombie_units_committed = 0;  ///< before any new owner had claimed (legitimate)
  std::size_t zombie_store_commits = 0;    ///< AtLeastOnce: a zombie's commit to the store
  std::size_t store_regressions = 0;       ///< AtLeastOnce: a position went back (zombies)
  std::size_t records_replayed = 0;        ///< AtLeastOnce: deliveries absorbed by the guard
  std::size_t records_due = 0;
  std::map<std::string, std::size_t> per_config;
};

/// active: in the group; zombie: expired, not told, polling on; told: expired and told (its
/// next poll loses its assignment, then it rejoins); leaving: left the group (its next poll
/// loses its assignment, then it stops); gone: its process ended.
enum class member_state { active, zombie, told, leaving, gone };

const char* name_of(member_state s) {
  switch (s) {
    case member_state::active:
      return "active";
    case member_state::zombie:
      return "zombie";
    case member_state::told:
      return "told";
    case member_state::leaving:
      return "leaving";
    case member_state::gone:
      return "gone";
  }
  return "?";
}

/// Crashes at the n-th fault point of a pipeline's life.
struct group_faults {
  std::size_t crash_at = never;
  std::size_t seen = 0;
  void at(const co::fault_point& p) {
    if (seen++ == crash_at)
      throw co::injected_crash{p};
  }
};

struct slot;

/// What all members share and what the schedule knows.
struct world {
  topic log{partitions};
  group_t g;
  table_t table;
  store_t store;
  bool transactional = false;  ///< TransactionalPosition (positions in the table), or AtLeastOnce
  totals* t = nullptr;
  std::ostringstream story;
  std::map<co::partition_id, std::vector<account_event>> events;  ///< every event ever appended
  std::map<co::partition_id, std::vector<int>> delivered;         ///< durable deliveries per offset
  std::map<co::partition_id, std::vector<int>> applied;        ///< of which the row took the record
  std::map<co::partition_id, std::vector<bool>> acknowledged;  ///< deleted unread, acknowledged
  // The history: the highest epoch claimed per partition and by whom; the last position
  // committed per partition.
  std::map<co::partition_id, std::pair<co::epoch, std::int32_t>> claimed;
  std::map<co::partition_id, co::position> committed;
  /// AtLeastOnce: a zombie committed this partition's position since it was last assigned.
  std::map<co::partition_id, bool> zombie_committed_since_assign;
  std::set<co::partition_id> pending_gaps;  ///< refused at assignment, not yet acknowledged

  explicit world(co::memory::rebalance_protocol protocol) : g(log, protocol) {}

  [[noreturn]] void fail(const std::string& what) {
    throw schedule_failure{what + "\n    schedule: " + story.str()};
  }
  std::optional<co::position> stored(co::partition_id k) {
    return transactional ? table.load_position(k) : store.load(k);
  }
  void append(co::partition_id k, std::int64_t account) {
    std::vector<account_event>& es = events[k];
    std::int64_t seq = 0;
    for (const account_event& e : es)
      seq += e.key == account ? 1 : 0;
    const account_event e{account, seq};
    const co::offset o = log.append(k, e);
    if (o.value() != static_cast<std::int64_t>(es.size()))
      fail("the log gave offset " + std::to_string(o.value()) + " to event " +
           std::to_string(es.size()));
    es.push_back(e);
  }
  int& count(std::map<co::partition_id, std::vector<int>>& m, co::partition_id k, co::offset o) {
    std::vector<int>& v = m[k];
    const auto i = static_cast<std::size_t>(o.value());
    if (i >= v.size())
      v.resize(i + 1, 0);
    return v[i];
  }
  // A position became durable: never below the last one unless a zombie is involved
  // (AtLeastOnce), whose store cannot refuse it.
  void position_committed(co::partition_id k, co::position p, bool by_zombie,
                          const std::string& who) {
    ++t->positions_written;
    const auto it = committed.find(k);
    if (it != committed.end() && p < it->second) {
      if (transactional)
        fail(who + " committed partition " + std::to_string(k.value()) + " at " +
             std::to_string(p.value()) + ", below the committed " +
             std::to_string(it->second.value()));
      if (!by_zombie && !zombie_committed_since_assign[k])
        fail(who + " moved partition " + std::to_string(k.value()) + "'s position back to " +
             std::to_string(p.value()) + " from " + std::to_string(it->second.value()) +
             " with no zombie involved");
      ++t->store_regressions;
    }
    committed[k] = p;
    if (by_zombie && !transactional) {
      ++t->zombie_store_commits;
      zombie_committed_since_assign[k] = true;
    }
  }
};

/// One consumer process: a member of the group with its source, sink, store and pipeline.
struct slot {
  std::size_t index = 0;
  group_t::member_id id = 0;
  member_state state = member_state::active;
  std::size_t rolled_back_rows = 0;  ///< rows of the last transaction rolled back
};

/// The member's view of the shared table: forwards every call, and writes the history as the
/// table commits — claims, positions, rows — checking each against what came before.
class member_sink {
 public:
  using row_type = account_event;
  using key_type = account_key;
  using capabilities = table_t::capabilities;

  member_sink(world& w, slot& s) : w_(&w), s_(&s) {}

  co::write_outcome apply(co::partition_id k, co::offset o, const account_event& e) {
    const co::write_outcome out = w_->table.apply(k, o, e);
    rows_.push_back(staged_row{k, o, out});
    return out;
  }
  void begin() {
    w_->table.begin();
    rows_.clear();
    positions_.clear();
    claims_.clear();
  }
  void commit() {
    w_->table.commit();
    committed();
  }
  void rollback() {
    w_->table.rollback();
    s_->rolled_back_rows = rows_.size();
    rows_.clear();
    positions_.clear();
    claims_.clear();
  }
  void store_position(co::partition_id k, co::position p) {
    w_->table.store_position(k, p);
    positions_.push_back(staged_position{k, p, std::nullopt});
  }
  void store_position(co::partition_id k, co::position p, co::epoch e) {
    w_->table.store_position(k, p, e);
    positions_.push_back(staged_position{k, p, e});
  }
  [[nodiscard]] std::optional<co::position> load_position(co::partition_id k) const {
    return w_->table.load_position(k);
  }
  std::optional<co::position> claim(co::partition_id k, co::epoch e) {
    if (crash_in_claim) {
      crash_in_claim = false;
      crash_in_claim_fired = true;
      throw co::injected_crash{};
    }
    std::optional<co::position> p = w_->table.claim(k, e);
    claims_.emplace_back(k, e);
    return p;
  }
  co::claimed claim_next(co::partition_id) {
    w_->fail("a group member claimed with no epoch of its own");
  }
  [[nodiscard]] std::int64_t era() const { return w_->table.era(); }
  void check_partition_count(std::size_t n) { w_->table.check_partition_count(n); }
  [[nodiscard]] std::optional<co::offset> applied_watermark(co::partition_id k) const {
    return w_->table.applied_watermark(k);
  }

  bool crash_in_claim = false;
  bool crash_in_claim_fired = false;

 private:
  struct staged_row {
    co::partition_id k;
    co::offset o;
    co::write_outcome out;
  };
  struct staged_position {
    co::partition_id k;
    co::position p;
    std::optional<co::epoch> e;
  };

  std::string who() const {
    return "member " + std::to_string(s_->id) + " (" + name_of(s_->state) + ")";
  }

  void committed() {
    world& w = *w_;
    for (const auto& [k, e] : claims_) {
      auto [it, fresh] = w.claimed.try_emplace(k, e, s_->id);
      if (!fresh) {
        // Epochs only rise, and one epoch belongs to one member.
        if (e < it->second.first)
          w.fail(who() + " claimed partition " + std::to_string(k.value()) + " at epoch " +
                 std::to_string(e.value()) + " below " + std::to_string(it->second.first.value()));
        if (e == it->second.first && it->second.second != s_->id)
          w.fail(who() + " claimed partition " + std::to_string(k.value()) + " at epoch " +
                 std::to_string(e.value()) + ", which member " + std::to_string(it->second.second) +
                 " holds");
        it->second = {e, s_->id};
      }
      ++w.t->claims;
    }
    for (const staged_position& p : positions_) {
      if (!p.e)
        w.fail(who() + " stored a position without its epoch");
      const auto it = w.claimed.find(p.k);
      if (it == w.claimed.end() || it->second.first != *p.e || it->second.second != s_->id)
        w.fail(who() + " committed partition " + std::to_string(p.k.value()) + "'s position at " +
               "epoch " + std::to_string(p.e->value()) + ", which is not the partition's claim");
      w.position_committed(p.k, p.p, s_->state == member_state::zombie, who());
    }
    for (const staged_row& r : rows_) {
      // Under TransactionalPosition a row commits with its partition's position.
      if (w.transactional) {
        const bool covered = std::ranges::any_of(
            positions_, [&](const staged_position& p) { return p.k == r.k && p.p.covers(r.o); });
        if (!covered)
          w.fail(who() + " committed partition " + std::to_string(r.k.value()) + " offset " +
                 std::to_string(r.o.value()) + " without its position");
      }
      ++w.count(w.delivered, r.k, r.o);
      if (r.out == co::write_outcome::applied)
        ++w.count(w.applied, r.k, r.o);
    }
    if (s_->state == member_state::zombie && !rows_.empty())
      ++w.t->zombie_units_committed;
    rows_.clear();
    positions_.clear();
    claims_.clear();
  }

  world* w_;
  slot* s_;
  std::vector<staged_row> rows_;
  std::vector<staged_position> positions_;
  std::vector<std::pair<co::partition_id, co::epoch>> claims_;
};

/// The member's view of the shared position store (AtLeastOnce).
class member_store {
 public:
  using capabilities = store_t::capabilities;
  member_store(world& w, slot& s) : w_(&w), s_(&s) {}
  [[nodiscard]] std::optional<co::position> load(co::partition_id k) const {
    return w_->store.load(k);
  }
  void commit(co::partition_id k, co::position p) {
    w_->store.commit(k, p);
    w_->position_committed(k, p, s_->state == member_state::zombie,
                           "member " + std::to_string(s_->id) + " (" + name_of(s_->state) + ")");
  }

 private:
  world* w_;
  slot* s_;
};

/// The member's group-managed source: forwards to memory::group's member, and holds every
/// assignment and every poll to the model — position_lost or fenced exactly when due, each
/// partition started exactly at its stored position, records read without a gap.
class observed_member {
 public:
  using capabilities = topic::capabilities;

  observed_member(world& w, slot& s) : w_(&w), s_(&s), inner_(w.g.consumer_of(s.id)) {
    relay_.self = this;
  }
  observed_member(const observed_member&) = delete;
  observed_member& operator=(const observed_member&) = delete;

  void listen(co::assignment_listener& l) {
    outer_ = &l;
    inner_.listen(relay_);
  }
  void seek(co::partition_id k, co::position p) {
    inner_.seek(k, p);
    cursors_[k] = p;
  }
  [[nodiscard]] std::span<const topic::record_type> poll(std::size_t n) {
    world& w = *w_;
    refused_ = false;
    std::span<const topic::record_type> batch;
    try {
      batch = inner_.poll(n);
    } catch (const co::position_lost& e) {
      if (refused_)
        throw;  // the assignment was refused: checked there
      // The read position of the first partition (ascending) that retention overtook.
      const auto behind = std::ranges::find_if(
          cursors_, [&](const auto& c) { return c.second < w.log.earliest(c.first); });
      if (behind == cursors_.end())
        w.fail(who() +
               " got position_lost from its poll, but no read position is behind: " + e.what());
      if (e.stored() != behind->second || e.earliest() != w.log.earliest(behind->first))
        w.fail(who() + " got position_lost naming " + std::to_string(e.stored().value()) + "/" +
               std::to_string(e.earliest().value()) + ", due was partition " +
               std::to_string(behind->first.value()) + " at " +
               std::to_string(behind->second.value()));
      ++w.t->lost_at_poll;
      w.story << " lost@poll(p" << behind->first.value() << " " << behind->second.value() << "<"
              << e.earliest().value() << ")";
      throw;
    }
    for (const auto& [k, c] : cursors_) {
      if (c < w.log.earliest(k))
        w.fail(who() + " read on although retention overtook partition " +
               std::to_string(k.value()) + " at " + std::to_string(c.value()));
    }
    for (const auto& r : batch) {
      const auto it = cursors_.find(r.source_partition);
      if (it == cursors_.end())
        w.fail(who() + " read partition " + std::to_string(r.source_partition.value()) +
               ", which it was not given");
      if (r.source_offset.value() != it->second.value())
        w.fail(who() + " read partition " + std::to_string(r.source_partition.value()) +
               " at offset " + std::to_string(r.source_offset.value()) + ", its read position is " +
               std::to_string(it->second.value()) + ": a jump");
      it->second = co::position::after(r.source_offset);
    }
    return batch;
  }
  [[nodiscard]] co::position earliest(co::partition_id k) const { return inner_.earliest(k); }
  [[nodiscard]] co::position end(co::partition_id k) const { return inner_.end(k); }
  [[nodiscard]] std::size_t partition_count() const noexcept { return inner_.partition_count(); }
  [[nodiscard]] std::vector<co::partition_id> assignment() const { return inner_.assignment(); }

 private:
  struct relay final : co::assignment_listener {
    observed_member* self = nullptr;
    std::vector<co::start_at> assigned(std::span<const co::partition_id> ks,
                                       std::int32_t generation) override {
      return self->on_assigned(ks, generation);
    }
    void revoked(std::span<const co::partition_id> ks) override {
      self->outer_->revoked(ks);
      self->forget(ks);
    }
    void lost(std::span<const co::partition_id> ks) override {
      self->outer_->lost(ks);
      self->forget(ks);
    }
  };

  std::string who() const {
    return "member " + std::to_string(s_->id) + " (" + name_of(s_->state) + ")";
  }

  void forget(std::span<const co::partition_id> ks) {
    for (const co::partition_id k : ks)
      cursors_.erase(k);
  }

  std::vector<co::start_at> on_assigned(std::span<const co::partition_id> ks,
                                        std::int32_t generation) {
    world& w = *w_;
    std::vector<co::partition_id> sorted(ks.begin(), ks.end());
    std::ranges::sort(sorted);
    // What is due, in the order the pipeline claims: a stale epoch is fenced, a stored position
    // retention overtook is lost, the first such partition is the one named.
    const co::epoch mine = co::epoch::of(w.table.era(), generation);
    std::optional<std::pair<co::partition_id, co::epoch>> due_fence;
    std::optional<co::partition_id> due_lost;
    std::map<co::partition_id, std::optional<co::position>> stored;
    for (const co::partition_id k : sorted) {
      if (w.transactional && mine < w.table.owner(k)) {
        due_fence = {k, w.table.owner(k)};
        break;
      }
      stored[k] = w.stored(k);
      if (stored[k] && *stored[k] < w.log.earliest(k)) {
        due_lost = k;
        break;
      }
    }
    std::vector<co::start_at> starts;
    try {
      starts = outer_->assigned(ks, generation);
    } catch (const co::position_lost& e) {
      refused_ = true;
      if (!due_lost)
        w.fail(who() + " was refused its assignment with position_lost, none was due: " + e.what());
      if (e.stored() != *stored[*due_lost] || e.earliest() != w.log.earliest(*due_lost))
        w.fail(who() + " was refused partition " + std::to_string(due_lost->value()) +
               " with the wrong offsets: " + e.what());
      ++w.t->lost_at_claim;
      w.pending_gaps.insert(*due_lost);
      w.story << " lost@assign(p" << due_lost->value() << " " << stored[*due_lost]->value() << "<"
              << e.earliest().value() << ")";
      throw;
    } catch (const co::fenced& e) {
      refused_ = true;
      if (!due_fence || e.partition() != due_fence->first || e.mine() != mine ||
          e.current() != due_fence->second)
        w.fail(who() + " was fenced at assignment, not as due: " + e.what());
      if (s_->state != member_state::zombie)
        w.fail(who() + " was fenced claiming at its own generation: " + e.what());
      ++w.t->zombie_claims_fenced;
      w.story << " fenced@assign(p" << e.partition().value() << ")";
      throw;
    } catch (const co::injected_crash&) {
      refused_ = true;
      throw;
    } catch (const schedule_failure&) {
      throw;
    } catch (const std::exception& e) {
      w.fail(who() + ": unexpected failure of an assignment: " + e.what());
    }
    if (due_fence || due_lost)
      w.fail(who() + " took partition " +
             std::to_string((due_fence ? due_fence->first : *due_lost).value()) +
             (due_fence ? " although its epoch is stale" : " although retention overtook it"));
    if (starts.size() != sorted.size())
      w.fail(who() + " was told " + std::to_string(sorted.size()) + " partitions and started " +
             std::to_string(starts.size()));
    for (const co::start_at& s : starts) {
      const co::position want = stored[s.partition].value_or(w.log.earliest(s.partition));
      if (s.at != want)
        w.fail(who() + " started partition " + std::to_string(s.partition.value()) + " at " +
               std::to_string(s.at.value()) + ", its stored position is " +
               std::to_string(want.value()));
      cursors_[s.partition] = s.at;
      w.zombie_committed_since_assign[s.partition] = false;
    }
    w.story << " m" << s_->id << ":g" << generation << "{";
    for (const co::partition_id k : sorted)
      w.story << k.value();
    w.story << "}";
    return starts;
  }

  world* w_;
  slot* s_;
  group_t::member_consumer inner_;
  relay relay_;
  co::assignment_listener* outer_ = nullptr;
  std::map<co::partition_id, co::position> cursors_;  ///< the reader's, as the model sees them
  bool refused_ = false;
};

template <class Policy>
struct member_parts {
  static constexpr bool transactional = co::policy_facts_v<Policy>.position_in_sink;
  using pipeline_t = std::conditional_t<
      transactional,
      co::pipeline<observed_member, member_sink, Policy, co::with_faults<group_faults>>,
      co::pipeline<observed_member, member_sink, Policy, co::with_store<member_store>,
                   co::with_faults<group_faults>>>;
  static_assert(
      co::can_make_pipeline<observed_member, member_sink, Policy, co::with_faults<group_faults>> ==
      transactional);

  slot s;
  member_sink sink;
  member_store st;
  observed_member source;
  pipeline_t p;

  member_parts(world& w, std::size_t index, group_t::member_id id, co::settings settings)
      : s{index, id}, sink(w, s), st(w, s), source(w, s), p(make(settings)) {}

 private:
  pipeline_t make(co::settings settings) {
    if constexpr (transactional)
      return pipeline_t(source, sink, settings);
    else
      return pipeline_t(source, sink, st, settings);
  }
};

template <class Policy>
std::string config_name(co::memory::rebalance_protocol protocol) {
  return policy_name<Policy>() +
         (protocol == co::memory::rebalance_protocol::eager ? " / eager" : " / cooperative");
}

template <class Policy>
void run_schedule(std::mt19937_64& rng, totals& t) {
  using parts_t = member_parts<Policy>;
  auto draw = [&rng](std::uint64_t n) { return static_cast<std::int64_t>(rng() % n); };
  static constexpr std::array<std::size_t, 6> batches{1, 2, 3, 5, 8, 16};
  static constexpr std::array<std::size_t, 4> splits{0, 0, 2, 3};

  const auto protocol = draw(3) == 0 ? co::memory::rebalance_protocol::cooperative
                                     : co::memory::rebalance_protocol::eager;
  world w(protocol);
  w.transactional = parts_t::transactional;
  w.t = &t;
  const co::settings settings{
      .batch_size = batches[static_cast<std::size_t>(draw(batches.size()))],
      .max_transaction_rows = splits[static_cast<std::size_t>(draw(splits.size()))]};
  const std::int64_t accounts = 2 + draw(3);
  const std::size_t max_members = 2 + static_cast<std::size_t>(draw(3));
  const std::int64_t steps = 30 + draw(51);
  auto append_some = [&](co::partition_id k, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
      w.append(k, account_of(k, draw(static_cast<std::uint64_t>(accounts))));
  };
  for (std::size_t k = 0; k < partitions; ++k)
    append_some(part(k), draw(13));
  w.story << config_name<Policy>(protocol) << "; batch " << settings.batch_size << " split "
          << settings.max_transaction_rows << ", " << accounts << " accounts per partition, up to "
          << max_members << " members;";

  std::vector<std::unique_ptr<parts_t>> members;
  std::size_t next_index = 0;
  auto live = [&](auto pred) {
    std::vector<parts_t*> out;
    for (auto& m : members)
      if (m && m->s.state != member_state::gone && pred(m->s.state))
        out.push_back(m.get());
    return out;
  };
  auto pick = [&](const std::vector<parts_t*>& from) {
    return from[static_cast<std::size_t>(draw(from.size()))];
  };
  auto join = [&] {
    const group_t::member_id id = w.g.join();
    members.push_back(std::make_unique<parts_t>(w, next_index++, id, settings));
    ++t.joins;
    w.story << "\n  join m" << id;
  };
  // A crashed process comes back with a fresh pipeline: a member still in the group keeps its
  // id (a quick restart, as with static membership); one the group expired joins anew.
  auto restart = [&](std::unique_ptr<parts_t>& m) {
    const member_state was = m->s.state;
    const group_t::member_id id = m->s.id;
    const std::size_t index = m->s.index;
    m.reset();
    if (was == member_state::active) {
      m = std::make_unique<parts_t>(w, index, id, settings);
      w.story << " restart m" << id;
    } else {
      w.story << " (m" << id << " gone)";
      join();
    }
  };
  auto owner_of = [&](parts_t* p) -> std::unique_ptr<parts_t>& {
    for (auto& m : members)
      if (m.get() == p)
        return m;
    w.fail("no such member");
  };

  // One poll of one member, and what the schedule does about its outcome. Returns false when
  // the member's process is gone (crashed and restarted, or replaced): `m` is then dangling.
  auto poll = [&](parts_t* m) {
    ++t.polls;
    const member_state state = m->s.state;
    w.story << "\n  m" << m->s.id << "(" << name_of(state) << ") poll";
    try {
      const std::size_t n = m->p.poll_once();
      t.records_polled += n;
      w.story << " " << n;
      if (state == member_state::told || state == member_state::leaving) {
        // Its poll lost the assignment and read nothing. Told it was expired, the process
        // rejoins as a new member; leaving, it stops.
        if (n != 0 || !m->source.assignment().empty())
          w.fail("member " + std::to_string(m->s.id) +
                 " read on after it left the group or was told it had been expired");
        m->s.state = member_state::gone;
        owner_of(m).reset();
        if (state == member_state::told)
          join();
        return false;
      }
    } catch (const co::injected_crash&) {
      ++(m->sink.crash_in_claim_fired ? t.crashes_in_claim : t.crashes_at_points);
      w.story << " crash";
      restart(owner_of(m));
      return false;
    } catch (const co::position_lost&) {
      // Checked by the source as it happened; the member goes on polling.
    } catch (const co::fenced& e) {
      if (state != member_state::zombie)
        w.fail("member " + std::to_string(m->s.id) + " (" + name_of(state) +
               ") was fenced: " + e.what());
      if (m->s.rolled_back_rows != 0) {
        ++t.zombie_units_fenced;
        t.zombie_rows_rolled_back += m->s.rolled_back_rows;
      }
      w.story << " fenced(p" << e.partition().value() << ", " << m->s.rolled_back_rows
              << " rows rolled back)";
      m->s.rolled_back_rows = 0;
    } catch (const schedule_failure&) {
      throw;
    } catch (const std::exception& e) {
      w.fail("member " + std::to_string(m->s.id) + ": unexpected " + e.what());
    }
    return true;
  };

  // The operator acknowledges a gap retention made: the partition resumes at its earliest
  // retained record, and the deleted records are no longer due.
  auto acknowledge = [&](co::partition_id k) {
    w.pending_gaps.erase(k);
    const std::optional<co::position> s = w.stored(k);
    const co::position earliest = w.log.earliest(k);
    if (!s || !(*s < earliest))
      return;
    if (w.transactional) {
      w.table.begin();
      w.table.store_position(k, earliest);
      w.table.commit();
    } else {
      w.store.commit(k, earliest);
    }
    w.position_committed(k, earliest, false, "the operator");
    std::vector<bool>& gap = w.acknowledged[k];
    gap.resize(static_cast<std::size_t>(earliest.value()), false);
    for (std::int64_t o = s->value(); o < earliest.value(); ++o) {
      gap[static_cast<std::size_t>(o)] = true;
      ++t.records_deleted_unread;
    }
    ++t.acknowledged;
    w.story << "\n  operator: p" << k.value() << " resumes at " << earliest.value();
  };

  const std::size_t first = 1 + static_cast<std::size_t>(draw(max_members));
  for (std::size_t i = 0; i < first; ++i)
    join();

  for (std::int64_t step = 0; step < steps; ++step) {
    ++t.steps;
    const auto actives = live([](member_state s) { return s == member_state::active; });
    const auto zombies = live([](member_state s) { return s == member_state::zombie; });
    const auto running = live([](member_state) { return true; });
    const std::int64_t action = draw(100);
    if (action < 40) {
      if (!running.empty())
        poll(pick(running));
    } else if (action < 48) {
      if (actives.size() < max_members)
        join();
    } else if (action < 52) {
      if (actives.size() > 1) {
        parts_t* m = pick(actives);
        w.story << "\n  m" << m->s.id << " leaves";
        w.g.leave(m->s.id);
        ++t.leaves;
        m->s.state = member_state::leaving;
        poll(m);  // it hears its assignment is gone, stores nothing, and stops
      }
    } else if (action < 56) {
      if (!actives.empty()) {
        parts_t* m = pick(actives);
        w.g.expire(m->s.id, true);
        m->s.state = member_state::told;
        ++t.expired_told;
        w.story << "\n  expire m" << m->s.id << " (told)";
      }
    } else if (action < 63) {
      if (!actives.empty()) {
        parts_t* m = pick(actives);
        w.g.expire(m->s.id, false);
        m->s.state = member_state::zombie;
        ++t.expired_untold;
        w.story << "\n  expire m" << m->s.id << " (not told: a zombie)";
      }
    } else if (action < 67) {
      if (!zombies.empty()) {
        parts_t* m = pick(zombies);
        w.g.tell(m->s.id);
        m->s.state = member_state::told;
        ++t.tells;
        w.story << "\n  tell m" << m->s.id;
      }
    } else if (action < 74) {
      if (!running.empty()) {
        parts_t* m = pick(running);
        const bool in_claim = draw(4) == 0;
        if (in_claim) {
          m->sink.crash_in_claim = true;
          w.story << "\n  arm a crash in m" << m->s.id << "'s next claim";
        } else {
          m->p.faults().crash_at = m->p.faults().seen + static_cast<std::size_t>(draw(12));
          w.story << "\n  arm a crash in m" << m->s.id << " at point " << m->p.faults().crash_at;
        }
        if (poll(m)) {
          // It did not reach the point: disarmed, the process goes on.
          m->sink.crash_in_claim = false;
          m->p.faults().crash_at = never;
        }
      }
    } else if (action < 79) {
      // Retention of one partition, sometimes past positions some members still need.
      std::vector<co::partition_id> stored;
      for (std::size_t k = 0; k < partitions; ++k)
        if (w.stored(part(k)))
          stored.push_back(part(k));
      if (!stored.empty()) {
        const co::partition_id k = stored[static_cast<std::size_t>(draw(stored.size()))];
        const std::int64_t lo = w.log.earliest(k).value();
        const co::position cut{lo +
                               draw(static_cast<std::uint64_t>(w.log.end(k).value() - lo + 1))};
        w.log.truncate_before(k, cut);
        ++t.retention_runs;
        w.story << "\n  retention: p" << k.value() << " from " << cut.value();
      }
    } else if (action < 92) {
      const co::partition_id k = part(static_cast<std::size_t>(draw(partitions)));
      const std::int64_t n = 1 + draw(4);
      append_some(k, n);
      t.appends += static_cast<std::size_t>(n);
      w.story << "\n  append " << n << " to p" << k.value();
    } else if (!w.pending_gaps.empty()) {
      acknowledge(*w.pending_gaps.begin());
    }
  }

  // ---- the end: zombies are told and stop, every gap is acknowledged, the producer writes one
  // more event per partition, and the members drain the topic ----------------------------------
  w.story << "\n  -- end --";
  for (auto& m : members) {
    if (m && m->s.state == member_state::zombie) {
      w.g.tell(m->s.id);
      m->s.state = member_state::told;
      ++t.tells;
      w.story << "\n  tell m" << m->s.id;
    }
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i] && members[i]->s.state == member_state::told)
      poll(members[i].get());  // replaced by a new member
  }
  if (live([](member_state s) { return s == member_state::active; }).empty())
    join();
  for (std::size_t k = 0; k < partitions; ++k)
    append_some(part(k), 1);
  bool drained = false;
  for (int round = 0; round < 100 && !drained; ++round) {
    while (!w.pending_gaps.empty())
      acknowledge(*w.pending_gaps.begin());
    const std::size_t before = t.records_polled;
    const std::size_t lost_before = t.lost_at_claim + t.lost_at_poll;
    for (parts_t* m : live([](member_state s) { return s == member_state::active; }))
      poll(m);
    bool at_end = true;
    for (std::size_t k = 0; k < partitions; ++k)
      at_end = at_end && w.stored(part(k)) == w.log.end(part(k));
    drained =
        at_end && t.records_polled == before && t.lost_at_claim + t.lost_at_poll == lost_before;
  }
  if (!drained)
    w.fail("the members did not drain the topic in 100 rounds");

  // ---- the model --------------------------------------------------------------------------------
  std::map<std::int64_t, std::pair<co::partition_id, std::int64_t>> newest;  // account -> (k, o)
  for (std::size_t kk = 0; kk < partitions; ++kk) {
    const co::partition_id k = part(kk);
    const std::vector<account_event>& es = w.events[k];
    for (std::size_t o = 0; o < es.size(); ++o) {
      const co::offset off{static_cast<std::int64_t>(o)};
      const auto& gap = w.acknowledged[k];
      const bool due = !(o < gap.size() && gap[o]);
      const int d = w.count(w.delivered, k, off);
      const int a = w.count(w.applied, k, off);
      if (due) {
        ++t.records_due;
        if (d == 0)
          w.fail("partition " + std::to_string(kk) + " offset " + std::to_string(o) + " was lost");
      }
      if (w.transactional && d != (due ? 1 : 0))
        w.fail("partition " + std::to_string(kk) + " offset " + std::to_string(o) +
               " was delivered " + std::to_string(d) + " times under TransactionalPosition");
      if (a > 1)
        w.fail("partition " + std::to_string(kk) + " offset " + std::to_string(o) +
               "'s row was applied " + std::to_string(a) + " times");
      if (d > 1)
        t.records_replayed += static_cast<std::size_t>(d - 1);
      if (d > 0)
        newest[es[o].key] = {k, static_cast<std::int64_t>(o)};
    }
    if (w.stored(k) != w.log.end(k))
      w.fail("partition " + std::to_string(kk) + " ends at a stored position other than its end");
    if (w.transactional && w.table.owner(k) != w.claimed[k].first)
      w.fail("partition " + std::to_string(kk) + "'s owner is not its last claim");
  }
  if (w.table.size() != newest.size())
    w.fail("the table has " + std::to_string(w.table.size()) + " rows, the model " +
           std::to_string(newest.size()));
  for (const auto& [account, where] : newest) {
    const auto* row = w.table.find(account_key{}(account_event{account, 0}));
    const account_event& want = w.events[where.first][static_cast<std::size_t>(where.second)];
    if (row == nullptr || row->source_partition != where.first ||
        row->source_offset != co::offset{where.second} || !(row->row == want))
      w.fail("account " + std::to_string(account) + " does not hold its last event (partition " +
             std::to_string(where.first.value()) + " offset " + std::to_string(where.second) + ")");
  }
  ++t.schedules;
  if (protocol == co::memory::rebalance_protocol::cooperative)
    ++t.cooperative;
  t.per_config[config_name<Policy>(protocol)]++;
}

using runner = void (*)(std::mt19937_64&, totals&);

const std::vector<std::pair<std::string, runner>>& configurations() {
  static const std::vector<std::pair<std::string, runner>> all{
      {"TransactionalPosition<EveryRecord>",
       &run_schedule<co::TransactionalPosition<co::EveryRecord>>},
      {"TransactionalPosition<EveryBatch>",
       &run_schedule<co::TransactionalPosition<co::EveryBatch>>},
      {"AtLeastOnce<EveryRecord>", &run_schedule<co::AtLeastOnce<co::EveryRecord>>},
      {"AtLeastOnce<EveryBatch>", &run_schedule<co::AtLeastOnce<co::EveryBatch>>},
  };
  return all;
}

std::optional<std::string> run_seed(std::uint64_t seed, totals& t) {
  std::mt19937_64 rng(seed);
  const auto& [name, run] = configurations()[rng() % configurations().size()];
  try {
    run(rng, t);
  } catch (const schedule_failure& f) {
    return f.what;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("group schedules: rebalances, zombies, crashes and retention never break the guarantee") {
  totals t;
  std::vector<std::pair<std::uint64_t, std::string>> failed;
  if (const auto single = environment_number("COMMIT_ORDER_CRASH_SEED")) {
    if (auto f = run_seed(*single, t))
      failed.emplace_back(*single, *f);
  } else {
    const std::uint64_t count = environment_number("COMMIT_ORDER_CRASH_SCHEDULES").value_or(10000);
    const std::uint64_t base =
        environment_number("COMMIT_ORDER_CRASH_BASE_SEED").value_or(default_base_seed);
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t seed = splitmix64(base + i);
      if (auto f = run_seed(seed, t))
        failed.emplace_back(seed, *f);
    }
    if (count >= 10000) {
      // Enough schedules reach every configuration and every kind of event.
      CHECK(t.per_config.size() == 2 * configurations().size());
      CHECK(t.crashes_at_points > 0);
      CHECK(t.crashes_in_claim > 0);
      CHECK(t.lost_at_claim > 0);
      CHECK(t.lost_at_poll > 0);
      CHECK(t.zombie_units_fenced > 0);
      CHECK(t.zombie_rows_rolled_back > 0);
      CHECK(t.zombie_claims_fenced > 0);
      CHECK(t.zombie_store_commits > 0);
      CHECK(t.records_replayed > 0);
    }
  }

  std::cout << "group schedules: " << t.schedules << " schedules (" << t.cooperative
            << " cooperative) over " << t.per_config.size() << " configurations, " << t.steps
            << " steps, " << t.polls << " polls reading " << t.records_polled << " records; "
            << t.joins << " joins, " << t.leaves << " leaves, " << t.expired_told
            << " expiries told, " << t.expired_untold << " zombies, " << t.tells << " tells; "
            << t.crashes_at_points << " crashes at fault points, " << t.crashes_in_claim
            << " in a claim; " << t.claims << " claims and " << t.positions_written
            << " position writes committed; " << t.retention_runs
            << " retention runs: " << t.lost_at_claim << " position_lost at assignment, "
            << t.lost_at_poll << " at a poll, all as due; " << t.acknowledged
            << " gaps acknowledged (" << t.records_deleted_unread
            << " records deleted unread); zombies: " << t.zombie_units_fenced << " units fenced ("
            << t.zombie_rows_rolled_back << " rows rolled back), " << t.zombie_claims_fenced
            << " claims fenced, " << t.zombie_units_committed
            << " units committed before a new owner claimed, " << t.zombie_store_commits
            << " AtLeastOnce store commits (" << t.store_regressions << " moved a position back); "
            << t.records_due << " records due, 0 lost, " << t.records_replayed
            << " replays (AtLeastOnce, absorbed)\n";
  for (const auto& [name, n] : t.per_config)
    std::cout << "  " << name << ": " << n << " schedules\n";
  MESSAGE(t.schedules << " group schedules, " << failed.size() << " failed");
  for (std::size_t i = 0; i < failed.size() && i < 10; ++i) {
    FAIL_CHECK("COMMIT_ORDER_CRASH_SEED=" << failed[i].first << " failed: " << failed[i].second);
  }
  CHECK(failed.empty());
}
