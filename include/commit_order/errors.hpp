// SPDX-License-Identifier: BSL-1.0
// commit_order/errors.hpp — the failures the pipeline reports instead of hiding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "commit_order/offset.hpp"

namespace commit_order {

namespace detail {
/// An error message, joined from its parts. Out of line and cold: a message is built only on a
/// failure path, and one copy of this code serves every error, where concatenating in each
/// constructor would have every translation unit that can throw them compile and optimise the
/// same string building again.
[[gnu::cold, gnu::noinline]] inline std::string join_message(
    std::initializer_list<std::string_view> parts) {
  std::size_t size = 0;
  for (const std::string_view part : parts)
    size += part.size();
  std::string out;
  out.reserve(size);
  for (const std::string_view part : parts)
    out.append(part);
  return out;
}
/// A number in a message (out of line, for the same reason).
[[gnu::cold, gnu::noinline]] inline std::string decimal(std::int64_t value) {
  return std::to_string(value);
}
}  // namespace detail

/// Base of every error the library throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A failure of the world, not of the record: the sink, the source or the position store could
/// not do its job (busy, locked, disk full, an I/O error, a lost connection, a failed rollback).
/// It is never the record's fault, so no error handling acts on it: it is not retried as the
/// record's, never dead-lettered, and the position does not move past it. The open unit is
/// rolled back, the error propagates as it is, and the next poll recovers from the durable
/// position and redoes the unit. Adapters classify their errors: a record's failure (a
/// constraint it violates, a value the sink refuses) is any other exception -- except an
/// allocation failure (std::bad_alloc), which is the world's like this one, whichever part
/// raised it: the process ran out of memory, the record did nothing wrong.
class infrastructure_error : public error {
 public:
  using error::error;
};

/// Implemented, beside an infrastructure_error, by a position store's error that means: the
/// commit was refused because the world is changing under the consumer (a consumer group
/// rebalancing, its generation superseded), and nothing of it was committed. It is the world's
/// and it passes: the pipeline does not stop. The unit's position is not believed committed;
/// under a policy that writes first the unit's rows stay (its sink absorbs the replay), under
/// one that commits first the unit is not written; the pipeline counts the refusal
/// (`refused_commits()`) and, at its next poll, recovers from the store -- after the rebalance,
/// with the partitions the group gives it -- so the records are read again, never skipped.
class commit_interrupted {
 public:
  commit_interrupted() = default;
  commit_interrupted(const commit_interrupted&) = default;
  commit_interrupted& operator=(const commit_interrupted&) = default;
  virtual ~commit_interrupted() = default;
};

/// Implemented, beside an infrastructure_error, by a sink's error that means: a commit was sent
/// and whether it took effect is unknown (its answer was lost), or it took effect without the
/// durability the sink declares. Doing the unit again in place could apply it twice, so the
/// pipeline never tries it again (retry_world passes it on): it stops, and recovery, which reads
/// the position from where it is kept, resolves it (redone if it did not commit, read on from
/// if it did).
class outcome_unknown {
 public:
  outcome_unknown() = default;
  outcome_unknown(const outcome_unknown&) = default;
  outcome_unknown& operator=(const outcome_unknown&) = default;
  virtual ~outcome_unknown() = default;
};

/// The sink's rollback failed after a unit of work failed. The sink's state is unknown until it
/// is reopened; the failure that caused the rollback is nested (std::rethrow_if_nested).
class rollback_failed : public infrastructure_error {
 public:
  explicit rollback_failed(const std::string& why)
      : infrastructure_error(
            detail::join_message({"commit_order: rolling back the sink's transaction failed: ", why,
                                  "; the sink must be reopened before it is used again"})) {}
};

/// The stored position points at records the source no longer retains. Reading from the
/// earliest retained record instead would silently lose everything in between. `partition()`
/// is the partition whose records were deleted (0 for a source of one stream).
class position_lost final : public error {
 public:
  position_lost(partition_id partition, position stored, position earliest)
      : error(detail::join_message(
            {"commit_order: position lost in partition ", detail::decimal(partition.value()),
             ": the position to resume from is ", detail::decimal(stored.value()),
             " but the partition's earliest retained record is ", detail::decimal(earliest.value()),
             "; records [", detail::decimal(stored.value()), ", ",
             detail::decimal(earliest.value()),
             ") were deleted by retention before they were applied"}))
      , partition_(partition)
      , stored_(stored)
      , earliest_(earliest) {}
  /// A source of one stream: partition 0.
  position_lost(position stored, position earliest)
      : position_lost(partition_id{0}, stored, earliest) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  [[nodiscard]] position stored() const noexcept { return stored_; }
  [[nodiscard]] position earliest() const noexcept { return earliest_; }

 private:
  partition_id partition_;
  position stored_;
  position earliest_;
};

/// The stored position lies past the end of the source: the position belongs to another
/// stream, or the source lost data it had acknowledged. `partition()` names the partition.
class position_beyond_end final : public error {
 public:
  position_beyond_end(partition_id partition, position stored, position end)
      : error(detail::join_message(
            {"commit_order: the stored position ", detail::decimal(stored.value()),
             " of partition ", detail::decimal(partition.value()),
             " is beyond the partition's end ", detail::decimal(end.value()),
             "; the position belongs to another stream or the source lost acknowledged records"}))
      , partition_(partition)
      , stored_(stored)
      , end_(end) {}
  /// A source of one stream: partition 0.
  position_beyond_end(position stored, position end)
      : position_beyond_end(partition_id{0}, stored, end) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  [[nodiscard]] position stored() const noexcept { return stored_; }
  [[nodiscard]] position end() const noexcept { return end_; }

 private:
  partition_id partition_;
  position stored_;
  position end_;
};

/// The sink holds a row stamped at or above the stored position (TransactionalPosition):
/// rows and position were meant to commit together, so this is a bug, never a legitimate state.
class invariant_violation final : public error {
 public:
  invariant_violation(position stored, offset watermark)
      : error(detail::join_message(
            {"commit_order: invariant violation: the sink holds a row from source offset ",
             detail::decimal(watermark.value()), " but its stored position is ",
             detail::decimal(stored.value()),
             "; rows and position were not committed in one transaction"}))
      , stored_(stored)
      , watermark_(watermark) {}

  [[nodiscard]] position stored() const noexcept { return stored_; }
  [[nodiscard]] offset watermark() const noexcept { return watermark_; }

 private:
  position stored_;
  offset watermark_;
};

/// A stale owner tried to claim or advance a position another owner has claimed since (a
/// "zombie" after a rebalance). Its transaction is rolled back; it must stop consuming the
/// partition. When an honest consumer group sees it after its group was deleted and recreated
/// (its generation restarted below the stored epoch), the way out is an explicit era bump.
class fenced final : public error {
 public:
  fenced(epoch mine, epoch current, partition_id partition = partition_id{0})
      : error(describe(mine, current, partition))
      , mine_(mine)
      , current_(current)
      , partition_(partition) {}

  /// Fenced by an owner whose epoch the store does not name (Kafka's group coordinator, or a
  /// newer producer under the same transactional.id): `current()` is `mine()`, and `by` says
  /// who refused this owner.
  fenced(epoch mine, partition_id partition, std::string_view by)
      : error(detail::join_message({"commit_order: fenced: this consumer owns partition ",
                                    detail::decimal(partition.value()), " at epoch ", name(mine),
                                    " but ", by, "; it lost the partition and must stop"}))
      , mine_(mine)
      , current_(mine)
      , partition_(partition) {}

  [[nodiscard]] epoch mine() const noexcept { return mine_; }
  [[nodiscard]] epoch current() const noexcept { return current_; }
  [[nodiscard]] partition_id partition() const noexcept { return partition_; }

 private:
  [[gnu::cold, gnu::noinline]] static std::string describe(epoch mine, epoch current,
                                                           partition_id partition) {
    // Built by join_message like every other message, not with operator+: each + instantiates
    // and optimises another concatenation in every translation unit that can throw this.
    const bool recreated = mine.era() == current.era() && mine.era() >= 0 && mine < current;
    const bool ownerless = current == epoch{0} && mine != epoch{0};
    return detail::join_message(
        {"commit_order: fenced: this consumer owns partition ", detail::decimal(partition.value()),
         " at epoch ", name(mine),
         ownerless ? " but the position row has no owner (epoch 0: it was deleted, or written "
                     "without a claim)"
                   : " but the position is owned at epoch ",
         ownerless ? "" : name(current), "; it lost the partition and must stop",
         recreated ? " (if the consumer group was deleted and recreated, its generation "
                     "restarted: bump the stream's era, see docs/adapters.md, never lower the "
                     "stored epoch)"
                   : ""});
  }
  [[gnu::cold, gnu::noinline]] static std::string name(epoch e) {
    if (e.era() == 0)
      return detail::decimal(e.value());
    return detail::join_message({detail::decimal(e.value()), " (era ", detail::decimal(e.era()),
                                 ", generation ", detail::decimal(e.generation()), ")"});
  }

  epoch mine_;
  epoch current_;
  partition_id partition_;
};

/// A key arrived from another partition than the one its stored row came from: the topic was
/// repartitioned, and offsets of the two partitions say nothing about which record is newer.
/// Never absorbed silently, never overwritten blindly: a version guard (VersionGuarded) is the
/// opt-in that survives repartitioning. An infrastructure error: it stops the pipeline with the
/// position unmoved, it is not the record's to dead-letter.
class key_moved_partition final : public infrastructure_error {
 public:
  key_moved_partition(const std::string& key, partition_id stored_partition, offset stored_offset,
                      partition_id incoming_partition, offset incoming_offset)
      : infrastructure_error(
            "commit_order: key " + key + " arrived from partition " +
            std::to_string(incoming_partition.value()) + " at offset " +
            std::to_string(incoming_offset.value()) + " but its row came from partition " +
            std::to_string(stored_partition.value()) + " at offset " +
            std::to_string(stored_offset.value()) +
            "; offsets of different partitions are not comparable (was the topic "
            "repartitioned?) -- drain the old partitions first, or guard on a per-key version "
            "(VersionGuarded)")
      , stored_partition_(stored_partition)
      , stored_offset_(stored_offset)
      , incoming_partition_(incoming_partition)
      , incoming_offset_(incoming_offset) {}

  [[nodiscard]] partition_id stored_partition() const noexcept { return stored_partition_; }
  [[nodiscard]] offset stored_offset() const noexcept { return stored_offset_; }
  [[nodiscard]] partition_id incoming_partition() const noexcept { return incoming_partition_; }
  [[nodiscard]] offset incoming_offset() const noexcept { return incoming_offset_; }

 private:
  partition_id stored_partition_;
  offset stored_offset_;
  partition_id incoming_partition_;
  offset incoming_offset_;
};

/// The stream has another number of partitions than when its positions were first claimed:
/// keys now hash to other partitions, and an offset guard would compare unrelated offsets.
class partition_count_changed final : public error {
 public:
  partition_count_changed(std::size_t stored, std::size_t current)
      : error("commit_order: the stream's recorded partition count is " + std::to_string(stored) +
              " (recorded at its first claim, or accepted by an operator) and it has " +
              std::to_string(current) +
              " now; keys may have moved between partitions -- drain the old partitions and "
              "accept the new count explicitly (see docs/adapters.md), or use VersionGuarded")
      , stored_(stored)
      , current_(current) {}

  [[nodiscard]] std::size_t stored() const noexcept { return stored_; }
  [[nodiscard]] std::size_t current() const noexcept { return current_; }

 private:
  std::size_t stored_;
  std::size_t current_;
};

/// The record before the stored position is not the one the position was stored after: the
/// source forgot records behind the position and gave their offsets to new records, which
/// resuming would skip. A file log that lost what it had not synced (a power loss) throws the
/// first form; a named source whose records were replaced (a Kafka topic deleted and recreated
/// under the same name) the second, which names the source and the stored position.
class offset_reused final : public error {
 public:
  offset_reused(partition_id partition, offset at, std::uint64_t stored_fingerprint,
                std::uint64_t found_fingerprint)
      : error("commit_order: the record at offset " + std::to_string(at.value()) +
              " of partition " + std::to_string(partition.value()) +
              " is not the one the stored position was committed after (fingerprint " +
              std::to_string(found_fingerprint) + ", stored " + std::to_string(stored_fingerprint) +
              "); the source lost records behind the position and reused their offsets")
      , partition_(partition)
      , stored_(position::after(at))
      , at_(at) {}

  /// `source` is the source's identity (`identified_source`), `stored` the position stored for
  /// `partition`, `at` the offset of the record compared (the one before `stored`).
  offset_reused(std::string source, partition_id partition, position stored, offset at,
                std::uint64_t stored_fingerprint, std::uint64_t found_fingerprint)
      : error(detail::join_message(
            {"commit_order: ", source, ", partition ", detail::decimal(partition.value()),
             ": the record at offset ", detail::decimal(at.value()),
             " is not the one the stored position ", detail::decimal(stored.value()),
             " was committed after (fingerprint found ", std::to_string(found_fingerprint),
             ", stored ", std::to_string(stored_fingerprint),
             "): the topic was deleted and recreated, or its records replaced, since that "
             "position was stored; resuming at ",
             detail::decimal(stored.value()), " would skip the records it holds now at offsets 0..",
             detail::decimal(stored.value() - 1),
             ". The rows and positions this consumer stored came from the old records: to read "
             "the new ones, stop its consumers and delete both (the sink's rows and this "
             "stream's position rows), or read them into a new table under another stream "
             "name"}))
      , partition_(partition)
      , stored_(stored)
      , at_(at)
      , source_(std::move(source)) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  /// The offset of the record compared.
  [[nodiscard]] offset at() const noexcept { return at_; }
  /// The stored position the record was checked for (`at() + 1` for a file log).
  [[nodiscard]] position stored() const noexcept { return stored_; }
  /// The source's identity; empty for a file log's error.
  [[nodiscard]] const std::string& source() const noexcept { return source_; }

 private:
  partition_id partition_;
  position stored_;
  offset at_;
  std::string source_;
};

/// A position row bound to another data table, or to another source: the row vouches for what
/// that consumer wrote and read, and starting from it would skip every record the other
/// consumer read. Two consumers kept the same stream and topic (the defaults, or one copied),
/// or two consumer groups share one. Thrown by a sink's claim at recovery, inside its
/// transaction, which is rolled back; and by a position store's load or commit, which changes
/// nothing.
class position_bound_elsewhere final : public error {
 public:
  position_bound_elsewhere(partition_id partition, std::string_view stream, std::string_view topic,
                           std::string_view bound_to, std::string_view mine,
                           std::string_view release)
      : error(detail::join_message(
            {"commit_order: the position of stream '", stream, "', topic '", topic, "', partition ",
             detail::decimal(partition.value()), " vouches for ", described(bound_to), ", not for ",
             mine_described(mine),
             ": two consumers share one position, and this one would skip what the other "
             "read. Give each consumer its own stream (sink_options::stream, "
             "store_options::stream). To move the position deliberately, with every consumer of "
             "it stopped, run: ",
             release}))
      , partition_(partition)
      , bound_to_(bound_to)
      , mine_(mine)
      , release_(release) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  /// The statement that unbinds the position, for an operator who moves it on purpose.
  [[nodiscard]] const std::string& release() const noexcept { return release_; }
  /// The table the stored position vouches for (and the source it was read from, if named).
  [[nodiscard]] const std::string& bound_to() const noexcept { return bound_to_; }
  /// The table of the sink that claimed it (and its source, if named).
  [[nodiscard]] const std::string& mine() const noexcept { return mine_; }

 private:
  // A binding as stored: `'table'`, `'table', read from <source>`, `read from <source>` (a
  // store told no table), or empty (unbound).
  static std::string mine_described(std::string_view mine) {
    if (mine.empty())
      return "this consumer, whose position store vouches for nothing (it is used outside a "
             "pipeline, or its pipeline's sink names no table and its source no identity)";
    return detail::join_message({"this consumer's ", described(mine)});
  }
  static std::string described(std::string_view binding) {
    if (binding.empty())
      return "nothing (an unbound position)";
    if (binding.front() == '\'')
      return detail::join_message({"table ", binding});
    return detail::join_message({"the records ", binding});
  }

  partition_id partition_;
  std::string bound_to_;
  std::string mine_;
  std::string release_;
};

/// A record's row failed, and the sink could only tell after apply() had returned: a sink that
/// sends a unit's rows together (one statement for many rows, as the unit commits) learns of a
/// row's failure in store_position() or commit(). It throws this from there, naming the record
/// the row came from, with the row's own failure nested (std::throw_with_nested). The loop
/// handles it as that record's failure -- retried, dead-lettered or stopping the pipeline as
/// the error handling says -- exactly as if apply() had thrown it. Not an infrastructure_error:
/// the record is at fault. A sink that cannot name the record throws an infrastructure_error
/// instead (the unit is redone, nothing is blamed).
/// (Not final: std::throw_with_nested derives from it.)
class row_failed : public error {
 public:
  row_failed(partition_id partition, offset at, const std::string& reason)
      : error("commit_order: the row of the record at offset " + std::to_string(at.value()) +
              " of partition " + std::to_string(partition.value()) + " failed: " + reason)
      , partition_(partition)
      , at_(at) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  [[nodiscard]] offset at() const noexcept { return at_; }

 private:
  partition_id partition_;
  offset at_;
};

/// A record failed in the transform or the sink and the error handling gave up on it. The
/// original exception is nested (std::rethrow_if_nested). `committed()` is where the durable
/// position stands: at or before `failed()` unless the policy had already committed past it
/// (at-most-once), in which case `lost_until()` says which records the position skipped.
/// (Not final: std::throw_with_nested derives from it to carry the original exception.)
class record_failed : public error {
 public:
  record_failed(offset failed, position committed, const std::string& reason,
                partition_id partition = partition_id{0})
      : error(describe(failed, committed, reason))
      , failed_(failed)
      , committed_(committed)
      , partition_(partition) {}

  [[nodiscard]] offset failed() const noexcept { return failed_; }
  /// The partition of the failed record (0 for a single-partition source).
  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  [[nodiscard]] position committed() const noexcept { return committed_; }
  /// True when the position had already passed the failed record: it is lost.
  [[nodiscard]] bool lost() const noexcept { return committed_.covers(failed_); }
  /// The position the failed record's loss extends to (records [failed, lost_until) are lost).
  [[nodiscard]] position lost_until() const noexcept {
    return lost() ? committed_ : position::at(failed_);
  }

 private:
  [[gnu::cold, gnu::noinline]] static std::string describe(offset failed, position committed,
                                                           const std::string& reason) {
    if (committed.covers(failed)) {
      return detail::join_message(
          {"commit_order: record at offset ", detail::decimal(failed.value()), " failed: ", reason,
           "; the committed position is ", detail::decimal(committed.value()),
           ", already past it: records [", detail::decimal(failed.value()), ", ",
           detail::decimal(committed.value()), ") are lost (the policy commits before it writes)"});
    }
    return detail::join_message({"commit_order: record at offset ", detail::decimal(failed.value()),
                                 " failed: ", reason, "; the committed position is ",
                                 detail::decimal(committed.value()),
                                 ", so the record will be read again on restart"});
  }

  offset failed_;
  position committed_;
  partition_id partition_;
};

}  // namespace commit_order
