// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/partitions.hpp — the loop's partitions: positions, claims, gaps,
// assignment (private).
//
// Where each partition starts (loaded or claimed, checked against what the source retains),
// what the loop keeps per partition, how an idle partition moves over offsets that hold no
// record, and what an assignment change does to the partitions a consumer owns.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "commit_order/detail/loop/surface.hpp"

namespace commit_order::detail {

// Loads (and, on a fencing sink, claims) the positions of `owned`, in ascending partition
// order and, where the position lives in the sink, in one transaction; checks each against
// what the source retains; records them; returns where each starts. `generation` is the
// group's, for a group-managed source.
template <class Config>
inline std::vector<start_at> pipeline_impl<Config>::claim_and_check(
    std::span<const partition_id> owned, std::optional<std::int32_t> generation) {
  std::vector<start_at> starts;
  starts.reserve(owned.size());
  std::vector<std::optional<epoch>> owners(owned.size());
  // The fingerprint stored with each partition's position, checked as the partition starts.
  [[maybe_unused]] std::vector<std::optional<std::uint64_t>> after(
      source_fingerprints ? owned.size() : 0);
  if constexpr (facts.position_in_sink) {
    sink_->begin();
    try {
      std::optional<epoch> group_epoch;
      if constexpr (stream_registry<Sink>) {
        if constexpr (partitioned)
          sink_->check_partition_count(static_cast<std::size_t>(source_->partition_count()));
        if (generation)
          group_epoch = epoch::of(static_cast<std::int64_t>(sink_->era()), *generation);
      } else {
        if (generation)
          group_epoch = epoch::of(0, *generation);
      }
      for (std::size_t i = 0; i < owned.size(); ++i) {
        const partition_id k = owned[i];
        std::optional<position> stored;
        if constexpr (fencing) {
          const std::optional<epoch> wanted = group_epoch ? group_epoch : settings_.owner_epoch;
          if (wanted) {
            stored = sink_->claim(k, *wanted);
            owners[i] = *wanted;
          } else {
            const claimed c = sink_->claim_next(k);
            stored = c.stored;
            owners[i] = c.owner;
          }
          if constexpr (checks_start_record) {
            if (stored)
              after[i] = sink_->claimed_fingerprint();
          } else if constexpr (checks_claimed_record) {
            if (stored)
              check_not_reused(*stored, sink_->claimed_fingerprint());
          }
        } else {
          stored = sink_->load_position(k);
        }
        position earliest{};
        const position start = checked_start(k, stored, &earliest);
        if constexpr (checks_start_record) {
          // The record before the position is still retained, or there is nothing to compare.
          if (!(earliest < start))
            after[i].reset();
        }
        if constexpr (SinkPart::has_watermark && facts.write_with_position) {
          // Rows and position commit together, so no row can be newer than the position. (An
          // order that writes outside the transaction legitimately leaves newer rows behind a
          // crash: it replays them, and this check does not apply.)
          const std::optional<offset> watermark = sink_->applied_watermark(k);
          if (watermark && !(stored && stored->covers(*watermark)))
            throw invariant_violation(stored.value_or(position{0}), *watermark);
        }
        starts.push_back(start_at{k, start});
      }
      sink_->commit();
    } catch (...) {
      roll_back_after_failure();
      throw;
    }
  } else {
    for (std::size_t i = 0; i < owned.size(); ++i) {
      const partition_id k = owned[i];
      const std::optional<position> stored = store_->load(k);
      position earliest{};
      const position start = checked_start(k, stored, &earliest);
      if constexpr (checks_store_start) {
        // Compared only while the record before the position is retained.
        if (stored && earliest < start)
          after[i] = store_->loaded_fingerprint();
      }
      if constexpr (checks_offsets) {
        if (stored)
          check_not_reused(*stored, store_->loaded_fingerprint());
      }
      starts.push_back(start_at{k, start});
    }
  }
  for (std::size_t i = 0; i < starts.size(); ++i)
    take(starts[i], owners[i]);
  if constexpr (source_fingerprints) {
    // Told before the source starts the partitions there (the seek, or the assignment the
    // listener's answer becomes).
    for (std::size_t i = 0; i < starts.size(); ++i) {
      if (!after[i] || starts[i].at.value() == 0)
        continue;
      source_->expect_before(starts[i].partition, starts[i].at, *after[i]);
    }
  }
  return starts;
}

// Where partition `k` starts, given what was stored for it: never below what the source
// retains (records were deleted unapplied) and never past its end.
template <class Config>
inline position pipeline_impl<Config>::checked_start(partition_id k, std::optional<position> stored,
                                                     position* earliest_out) const {
  const position earliest = source_->earliest(k);
  if (earliest_out != nullptr)
    *earliest_out = earliest;
  const position end = source_->end(k);
  const position start = stored.value_or(settings_.initial_position.value_or(earliest));
  // Reading on from `earliest` instead would silently skip everything in between.
  if (start < earliest)
    throw position_lost(k, start, earliest);
  if (start > end)
    throw position_beyond_end(k, start, end);
  return start;
}

// The record before a stored position must be the one the position was committed after.
template <class Config>
inline void pipeline_impl<Config>::check_not_reused(position stored,
                                                    std::optional<std::uint64_t> expected) {
  if (!expected || stored.value() == 0 || stored <= source_->earliest(partition_id{0}))
    return;  // nothing to compare with: no fingerprint, or the record is not retained
  const offset before{stored.value() - 1};
  const std::optional<std::uint64_t> found = source_->fingerprint_at(before);
  if (found && *found != *expected)
    throw offset_reused(partition_id{0}, before, *expected, *found);
}

// The partition now starts at `s` and belongs to this consumer at `owner`.
template <class Config>
inline void pipeline_impl<Config>::take(const start_at& s, std::optional<epoch> owner) {
  partition_entry& e = parts_.entry(s.partition);
  e.read = e.committed = s.at;
  e.owner = owner;
  if constexpr (async)
    async_.reset(s.partition, s.at);
}

// Each partition with nothing in flight whose next record the source knows can come no sooner
// than a later position (a read_committed consumer never receives a transaction's marker or
// an aborted transaction's records, yet they take offsets) has its read position moved there.
// Left on the marker, progress would count offsets as records still to read, forever.
template <class Config>
inline void pipeline_impl<Config>::settle_gaps() {
  if constexpr (settles_gaps) {
    for (partition_entry& e : parts_.all()) {
      if (!idle(e.read, e.committed, e.gap))
        continue;
      if (const std::optional<gap> g = source_->gap_after(e.id, e.read))
        move_over(e.id, e.read, e.committed, e.gap, *g);
    }
  }
}

// Nothing of the partition is in flight: everything read is durable, or all that was read
// past the durable position is a gap moved over.
template <class Config>
inline bool pipeline_impl<Config>::idle(position read, position committed,
                                        const moved_gap& last) noexcept {
  return read == committed || (last.to == read && last.from == committed);
}

// The partition's read position moves to g.end. Where the policy stores positions without a
// fingerprint, the position moves there durably too, as a unit with no records would: in a
// sink transaction of its own, or in the store (refused while the group rebalances, it
// stays, and the gap is found again). Where it keeps the fingerprint of the record a
// position follows, the durable position stays where it is, just after the last record:
// past the gap, the offset before it would be a marker, which no start can read back to
// compare, and a topic recreated under its name would no longer be caught. A restart reads
// that record again, and finds the gap again.
template <class Config>
inline void pipeline_impl<Config>::move_over(partition_id k, position& read, position& committed,
                                             moved_gap& last, const gap& g) {
  if constexpr (durable_gap_moves) {
    if constexpr (facts.position_in_sink) {
      in_transaction_of_its_own([&] {
        if constexpr (fencing)
          sink_->store_position(k, g.end, owner_of(k));
        else
          sink_->store_position(k, g.end);
      });
    } else {
      try {
        if constexpr (partitioned && batch_position_store<Store>) {
          const start_at s{k, g.end};
          store_->commit(std::span<const start_at>(&s, 1));
        } else {
          store_->commit(k, g.end);
        }
      } catch (const std::exception& e) {
        if (!interruptible || dynamic_cast<const commit_interrupted*>(&e) == nullptr)
          throw;
        return;
      }
    }
  }
  // One run of offsets with no record, however many gaps the source reported it in.
  const bool extends = last.to == read && last.from < last.to;
  last = {extends ? last.from : read, g.end};
  if constexpr (durable_gap_moves)
    committed = g.end;
  read = g.end;
}

template <class Config>
inline std::vector<start_at> pipeline_impl<Config>::on_assigned(
    std::span<const partition_id> partitions, std::int32_t generation) {
  std::vector<partition_id> sorted(partitions.begin(), partitions.end());
  std::ranges::sort(sorted);
  if constexpr (auto_commit)
    last_auto_commit_ = Clock::now();
  return claim_and_check(sorted, generation);
}

template <class Config>
inline void pipeline_impl<Config>::on_revoked(std::span<const partition_id> partitions) {
  if constexpr (async) {
    // Writes of these partitions still in flight finish first; what completed is committed.
    wait_idle();
    settle_failures();
  }
  for (const partition_id k : partitions) {
    partition_entry* e = parts_.find(k);
    if (e == nullptr)
      continue;
    if constexpr (tracked_commit) {
      async_.commit_completed(*this, *e);
    } else if constexpr (facts.uses_position_store) {
      // Everything read of it has been handled: AutoCommit's timer may lag behind the read
      // position, and an orderly hand-over makes it durable (as Kafka's commit on revoke).
      if constexpr (auto_commit) {
        if (e->committed < e->read) {
          store_->commit(k, e->read);
          e->committed = e->read;
        }
      }
    }
    forget(k);
  }
}

template <class Config>
inline void pipeline_impl<Config>::on_lost(std::span<const partition_id> partitions) {
  // Another member may own them already: nothing is stored, the state is dropped.
  if constexpr (async)
    wait_idle();
  for (const partition_id k : partitions)
    forget(k);
}

template <class Config>
inline void pipeline_impl<Config>::forget(partition_id k) {
  parts_.forget(k);
  if constexpr (async)
    async_.forget(k);
}

template <class Config>
inline epoch pipeline_impl<Config>::owner_of(partition_id k) const {
  const partition_entry* e = parts_.find(k);
  // A partition this consumer no longer owns (lost in the middle of a unit) has no epoch: the
  // sink refuses epoch -1 like any stale one, and the unit rolls back.
  return e != nullptr && e->owner ? *e->owner : epoch{-1};
}

}  // namespace commit_order::detail
