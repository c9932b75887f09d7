// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/partitioned_log.hpp — an in-memory topic of several partitions.
//
// Part of the testing kit: Kafka's offset semantics per partition (offsets start at 0 and only
// grow; retention deletes from the front of one partition and moves its earliest()). Consumers
// read it through `consumer` (a partitioned source with a manual assignment, for tools and
// tests) or through `memory::group` (a group-managed source whose partitions a coordinator
// assigns and takes away).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"

namespace commit_order::memory {

template <class Event, durability_level Durability = Volatile>
class partitioned_log final {
 public:
  using record_type = partitioned_logged<Event>;
  /// The durability the log stands for (rule R9c compares it with the positions').
  using capabilities = commit_order::capabilities<Durability>;

  explicit partitioned_log(std::size_t partitions) : partitions_(partitions) {
    if (partitions == 0)
      throw std::invalid_argument("memory::partitioned_log: a topic has at least one partition");
  }

  /// Appends an event to partition `k` and returns the offset it was given there.
  offset append(partition_id k, Event event) {
    part& p = at(k);
    const offset o{p.base + static_cast<offset::value_type>(p.records.size())};
    p.records.push_back(record_type{k, o, std::move(event)});
    return o;
  }

  /// Retention: deletes partition `k`'s records before `p`. A consumer behind it gets
  /// `position_lost` from its next poll, never a jump.
  void truncate_before(partition_id k, position p) {
    part& q = at(k);
    const auto cut = std::clamp(p.value(), q.base, end(k).value());
    q.records.erase(q.records.begin(), q.records.begin() + (cut - q.base));
    q.base = cut;
  }

  [[nodiscard]] std::size_t partition_count() const noexcept { return partitions_.size(); }
  [[nodiscard]] position earliest(partition_id k) const { return position{at(k).base}; }
  [[nodiscard]] position end(partition_id k) const {
    const part& p = at(k);
    return position{p.base + static_cast<position::value_type>(p.records.size())};
  }
  /// Partition `k`'s retained records, oldest first.
  [[nodiscard]] std::span<const record_type> records(partition_id k) const { return at(k).records; }

  /// A partitioned source over this log with a manual assignment: it reads the partitions it
  /// is given, nothing is rebalanced. It must not outlive the log.
  class consumer final {
   public:
    using capabilities = typename partitioned_log::capabilities;

    consumer(const partitioned_log& log, std::vector<partition_id> assignment) : log_(&log) {
      assign(std::move(assignment));
    }

    /// Reads exactly `partitions` from now on, each from its earliest record until seek()ed.
    void assign(std::vector<partition_id> partitions) {
      std::ranges::sort(partitions);
      cursors_.clear();
      for (const partition_id k : partitions)
        cursors_.push_back(cursor{k, log_->earliest(k)});
    }

    void seek(partition_id k, position p) {
      cursor& c = cursor_of(k);
      if (p < log_->earliest(k))
        throw position_lost(k, p, log_->earliest(k));
      if (p > log_->end(k))
        throw position_beyond_end(k, p, log_->end(k));
      c.next = p;
    }

    /// Up to `max` records of the assigned partitions, taking turns between partitions so that
    /// one busy partition does not starve the others. Valid until the next poll.
    [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
      batch_.clear();
      if (cursors_.empty())
        return batch_;
      // Retention may have overtaken a cursor: it must hear so, never read on from earliest.
      for (const cursor& c : cursors_) {
        if (c.next < log_->earliest(c.partition))
          throw position_lost(c.partition, c.next, log_->earliest(c.partition));
      }
      // Fetch in chunks per partition, as a broker returns one run of each partition at a time.
      const std::size_t chunk = std::max<std::size_t>(1, max / cursors_.size());
      for (std::size_t visited = 0; visited < cursors_.size() && batch_.size() < max; ++visited) {
        cursor& c = cursors_[(turn_ + visited) % cursors_.size()];
        const auto rs = log_->records(c.partition);
        const auto first =
            static_cast<std::size_t>(c.next.value() - log_->earliest(c.partition).value());
        const std::size_t n = std::min({chunk, max - batch_.size(), rs.size() - first});
        batch_.insert(batch_.end(), rs.begin() + static_cast<std::ptrdiff_t>(first),
                      rs.begin() + static_cast<std::ptrdiff_t>(first + n));
        c.next = position{c.next.value() + static_cast<position::value_type>(n)};
      }
      turn_ = (turn_ + 1) % cursors_.size();
      return batch_;
    }

    [[nodiscard]] position earliest(partition_id k) const { return log_->earliest(k); }
    [[nodiscard]] position end(partition_id k) const { return log_->end(k); }
    [[nodiscard]] std::size_t partition_count() const noexcept { return log_->partition_count(); }
    /// The partitions this consumer reads, ascending.
    [[nodiscard]] std::vector<partition_id> assignment() const {
      std::vector<partition_id> out;
      for (const cursor& c : cursors_)
        out.push_back(c.partition);
      return out;
    }
    [[nodiscard]] position read_position(partition_id k) const {
      for (const cursor& c : cursors_)
        if (c.partition == k)
          return c.next;
      return position{};
    }
    /// Drops the buffered records of `partitions` (a revoke): none is returned again.
    void unassign(std::span<const partition_id> partitions) {
      std::erase_if(cursors_, [&](const cursor& c) {
        return std::ranges::find(partitions, c.partition) != partitions.end();
      });
      turn_ = 0;
    }

   private:
    struct cursor {
      partition_id partition;
      position next;
    };
    cursor& cursor_of(partition_id k) {
      for (cursor& c : cursors_)
        if (c.partition == k)
          return c;
      throw std::invalid_argument("memory::partitioned_log::consumer: partition " +
                                  std::to_string(k.value()) + " is not assigned to it");
    }

    const partitioned_log* log_;
    std::vector<cursor> cursors_;
    std::vector<record_type> batch_;
    std::size_t turn_ = 0;
  };

  /// A consumer of `partitions` (a manual assignment).
  [[nodiscard]] consumer make_consumer(std::vector<partition_id> partitions) const {
    return consumer(*this, std::move(partitions));
  }

 private:
  struct part {
    std::vector<record_type> records;
    offset::value_type base = 0;
  };
  part& at(partition_id k) { return partitions_.at(static_cast<std::size_t>(k.value())); }
  const part& at(partition_id k) const {
    return partitions_.at(static_cast<std::size_t>(k.value()));
  }

  std::vector<part> partitions_;
};

}  // namespace commit_order::memory
