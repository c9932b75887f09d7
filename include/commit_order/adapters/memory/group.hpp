// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/group.hpp — an in-memory consumer group coordinator.
//
// Part of the testing kit: the rebalance protocol of a consumer group, in milliseconds and in
// the test's hands. Members join and leave; every change of membership starts a new
// generation and a range assignment of the topic's partitions (in member order); a member can
// be expired without being told — a zombie, which goes on consuming the partitions it had,
// with the epoch it had, until it is told — and a member can be expired and told (its
// assignment is then lost, not revoked).
//
// Each member reads through `group::member_consumer`, a group-managed source: inside `poll`
// it compares its view with the coordinator's and calls the pipeline's assignment listener —
// revoked (or lost), then assigned with the new generation — before it returns records of
// the new assignment, starting each partition exactly where the pipeline said.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "commit_order/adapters/memory/partitioned_log.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

/// How a rebalance moves partitions: all of them are revoked and reassigned (eager, as
/// Kafka's range assignor), or only those that move (cooperative: retained partitions keep
/// their epochs).
enum class rebalance_protocol { eager, cooperative };

template <class Event, durability_level Durability = Volatile>
class group final {
 public:
  using log_type = partitioned_log<Event, Durability>;
  using member_id = std::int32_t;

  explicit group(const log_type& log, rebalance_protocol protocol = rebalance_protocol::eager)
      : log_(&log), protocol_(protocol) {}

  /// A new member; the group rebalances (a new generation).
  member_id join() {
    const member_id m = next_member_++;
    members_.push_back(member_state{m, {}, true, false});
    rebalance();
    return m;
  }

  /// The member leaves in good order: its partitions are revoked, then reassigned.
  void leave(member_id m) {
    member_state& s = state(m);
    s.active = false;
    s.told = true;
    rebalance();
  }

  /// The member's session expired: its partitions go to the others. Unless `tell`, the member
  /// is not told and goes on as a zombie with the assignment and generation it had, until
  /// `tell(m)`; told, its next poll finds the assignment lost.
  void expire(member_id m, bool tell = false) {
    member_state& s = state(m);
    s.active = false;
    s.told = tell;
    rebalance();
  }

  /// The zombie learns it was expired: its next poll loses its assignment.
  void tell(member_id m) { state(m).told = true; }

  [[nodiscard]] std::int32_t generation() const noexcept { return generation_; }
  /// The partitions the coordinator gives `m` now (empty for a member that is not active).
  [[nodiscard]] std::vector<partition_id> assignment_of(member_id m) const {
    for (const member_state& s : members_)
      if (s.id == m)
        return s.active ? s.assignment : std::vector<partition_id>{};
    return {};
  }
  [[nodiscard]] const log_type& log() const noexcept { return *log_; }
  [[nodiscard]] rebalance_protocol protocol() const noexcept { return protocol_; }

  /// The group-managed source of one member.
  class member_consumer final {
   public:
    using capabilities = typename log_type::capabilities;

    member_consumer(group& g, member_id m)
        : group_(&g), member_(m), reader_(g.log(), std::vector<partition_id>{}) {}

    /// The pipeline listens anew as it recovers from a failure, and trusts nothing of an
    /// assignment it took before: what this member owns is delivered again at its next poll
    /// (claimed, and each partition started where the pipeline says). Otherwise the reader
    /// would read on past the failed unit while the pipeline has no epoch for its partitions.
    void listen(assignment_listener& l) {
      listener_ = &l;
      redeliver_ = seen_.has_value() && !reader_.assignment().empty();
    }

    void seek(partition_id k, position p) { reader_.seek(k, p); }

    /// Brings the assignment up to date (through the listener), then reads.
    [[nodiscard]] auto poll(std::size_t max) {
      if (listener_ == nullptr)
        throw std::logic_error("memory::group::member_consumer: poll before listen");
      synchronise();
      return reader_.poll(max);
    }

    [[nodiscard]] position earliest(partition_id k) const { return reader_.earliest(k); }
    [[nodiscard]] position end(partition_id k) const { return reader_.end(k); }
    [[nodiscard]] std::size_t partition_count() const noexcept { return reader_.partition_count(); }
    [[nodiscard]] std::vector<partition_id> assignment() const { return reader_.assignment(); }
    [[nodiscard]] member_id id() const noexcept { return member_; }
    /// The generation of the assignment this member acts on (a zombie's is old).
    [[nodiscard]] std::optional<std::int32_t> generation() const noexcept { return seen_; }

   private:
    void synchronise() {
      const member_state& s = group_->state(member_);
      if (!s.active) {
        if (!s.told || !seen_) {
          // A zombie: goes on with what it had, at the generation it had (claimed again at it
          // after a failure: fenced where another member owns the partition now).
          if (redeliver_)
            redeliver();
          return;
        }
        const auto owned = reader_.assignment();
        seen_.reset();
        redeliver_ = false;
        listener_->lost(owned);
        reader_.unassign(owned);
        return;
      }
      if (seen_ == group_->generation_) {
        if (redeliver_)
          redeliver();
        return;
      }
      const std::vector<partition_id> owned = reader_.assignment();
      const std::vector<partition_id>& wanted = s.assignment;
      std::vector<partition_id> give_up, take;
      if (group_->protocol_ == rebalance_protocol::eager) {
        give_up = owned;
        take = wanted;
      } else {
        // A partition is retained only if no other member was given it since this one last
        // acted on an assignment: one that was another's meanwhile (this member did not poll
        // through that generation) was claimed and moved on by it, and is revoked and taken
        // anew, never written at the old epoch from the old read position.
        auto retained = [&](partition_id k) {
          return std::ranges::find(wanted, k) != wanted.end() && group_->moved_at(k) <= *seen_;
        };
        for (const partition_id k : owned)
          if (!retained(k))
            give_up.push_back(k);
        // A retained partition keeps its epoch, unless the pipeline asked for its assignment
        // again (it knows none of it any more).
        for (const partition_id k : wanted)
          if (redeliver_ || std::ranges::find(owned, k) == owned.end() || !retained(k))
            take.push_back(k);
      }
      if (!give_up.empty()) {
        listener_->revoked(give_up);
        reader_.unassign(give_up);
      }
      std::vector<partition_id> keep;
      for (const partition_id k : reader_.assignment())
        if (std::ranges::find(take, k) == take.end())
          keep.push_back(k);
      // A listener that throws (fenced, position_lost) leaves the assignment to be retried by
      // the next poll: `seen_` moves only once the pipeline has taken the partitions.
      const std::vector<start_at> starts = listener_->assigned(take, group_->generation_);
      std::vector<partition_id> now = keep;
      now.insert(now.end(), take.begin(), take.end());
      const auto positions = snapshot(keep);
      reader_.assign(now);
      for (const auto& [k, p] : positions)
        reader_.seek(k, p);
      for (const start_at& st : starts)
        reader_.seek(st.partition, st.at);
      seen_ = group_->generation_;
      redeliver_ = false;
    }

    // What this member owns, told again at the generation it holds. A listener that throws
    // leaves it to be told again by the next poll.
    void redeliver() {
      const std::vector<partition_id> owned = reader_.assignment();
      const std::vector<start_at> starts = listener_->assigned(owned, *seen_);
      for (const start_at& st : starts)
        reader_.seek(st.partition, st.at);
      redeliver_ = false;
    }

    std::vector<std::pair<partition_id, position>> snapshot(const std::vector<partition_id>& ks) {
      std::vector<std::pair<partition_id, position>> out;
      for (const partition_id k : ks)
        out.emplace_back(k, reader_.read_position(k));
      return out;
    }

    group* group_;
    member_id member_;
    typename log_type::consumer reader_;
    assignment_listener* listener_ = nullptr;
    std::optional<std::int32_t> seen_;
    bool redeliver_ = false;
  };

  /// The source member `m` consumes through.
  [[nodiscard]] member_consumer consumer_of(member_id m) { return member_consumer(*this, m); }

 private:
  struct member_state {
    member_id id;
    std::vector<partition_id> assignment;
    bool active;
    bool told;
  };

  member_state& state(member_id m) {
    for (member_state& s : members_)
      if (s.id == m)
        return s;
    throw std::invalid_argument("memory::group: no such member");
  }

  // The generation in which partition `k` last went to another member (or to none).
  [[nodiscard]] std::int32_t moved_at(partition_id k) const {
    const auto i = static_cast<std::size_t>(k.value());
    return i < moved_at_.size() ? moved_at_[i] : 0;
  }

  // A new generation, and a range assignment over the active members in id order.
  void rebalance() {
    ++generation_;
    const std::size_t partitions = log_->partition_count();
    std::vector<member_id> before(partitions, 0);
    for (const member_state& s : members_)
      for (const partition_id k : s.assignment)
        before[static_cast<std::size_t>(k.value())] = s.id;
    std::vector<member_state*> active;
    for (member_state& s : members_) {
      if (s.active)
        active.push_back(&s);
      else
        s.assignment.clear();
    }
    const std::size_t n = log_->partition_count();
    for (std::size_t i = 0; i < active.size(); ++i) {
      active[i]->assignment.clear();
      const std::size_t from = n * i / active.size();
      const std::size_t to = n * (i + 1) / active.size();
      for (std::size_t k = from; k < to; ++k)
        active[i]->assignment.push_back(partition_id{static_cast<partition_id::value_type>(k)});
    }
    std::vector<member_id> after(partitions, 0);
    for (const member_state& s : members_)
      for (const partition_id k : s.assignment)
        after[static_cast<std::size_t>(k.value())] = s.id;
    moved_at_.resize(partitions, 0);
    for (std::size_t k = 0; k < partitions; ++k)
      if (before[k] != after[k])
        moved_at_[k] = generation_;
  }

  const log_type* log_;
  rebalance_protocol protocol_;
  std::vector<member_state> members_;
  std::vector<std::int32_t> moved_at_;  ///< per partition: see moved_at()
  member_id next_member_ = 1;
  // Kafka's first assignment is generation 2 on the mock; any start works, as long as it rises.
  std::int32_t generation_ = 0;
};

}  // namespace commit_order::memory
