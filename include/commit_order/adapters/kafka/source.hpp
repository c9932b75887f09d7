// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/source.hpp — a Kafka topic as a source, through librdkafka.
//
//   kafka::group_source<Event, Policy>      a member of a consumer group (group_managed_source):
//                                           the group coordinator assigns partitions, the
//                                           pipeline is told through its assignment listener
//   kafka::assigned_source<Event, Policy>   a fixed set of partitions, no group
//                                           (partitioned_source): tools, tests, crash tests
//   kafka::partition_source<Event, Policy>  one partition, no group (a single-partition
//                                           source, for single-partition sinks)
//
// Each reads with rd_kafka_consumer_poll, one message at a time, and builds the batch itself:
// librdkafka 2.0.2's batch API is not safe with rebalances. Each knows the pipeline's policy
// (its second parameter, which must be the pipeline's): the policy decides who commits
// positions to Kafka (see options.hpp), and the library owns the properties that decide it —
//   enable.auto.commit        false, or true under AtMostOnce<AutoCommit> (librdkafka's timer)
//   enable.auto.offset.store  false: librdkafka never stores an offset as it hands out a message
//   auto.offset.reset         error: a position retention deleted is position_lost{stored,
//                             earliest}, one past the end position_beyond_end; never a jump
//   auto.commit.interval.ms   settings.auto_commit_interval, under AutoCommit only
// A user property that contradicts them is refused (configuration_refused).
//
// A partition always starts exactly where the pipeline says: the listener's (or seek's)
// position goes into the assign list; a committed offset is used only when Kafka's offsets are
// the position store (kafka::offset_store), and then it is the store that reads it.
//
// Records are `partitioned_logged<Event>`: the partition, the offset, and the event the codec
// decoded from the message value. The durability the source stands for is Replicated: a topic
// replicated by its brokers and written with acks=all.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "commit_order/adapters/kafka/codec.hpp"
#include "commit_order/adapters/kafka/detail/consumer_core.hpp"
#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"
#include "commit_order/part_checks.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/record.hpp"

namespace commit_order::kafka {

/// A record read from Kafka: its partition, its offset and the decoded event.
template <class Event>
using record = partitioned_logged<Event>;

namespace detail {

/// What the three sources share: the consumer, its counters, and its close.
template <class Event, class Policy, class Codec>
class source_base {
  static_assert(part_rules::require<part_rules::kafka_source_policy, policy<Policy>>());
  // The consumer's commit order: a stand-in once the check above refused Policy, so that its
  // message is the one error.
  using checked_policy = std::conditional_t<policy<Policy>, Policy, AtLeastOnce<>>;

 public:
  using record_type = record<Event>;
  using event_type = Event;
  using policy_type = Policy;
  /// A Kafka topic: replicated by its brokers (rule R9c compares it with the positions').
  using capabilities = commit_order::capabilities<Replicated>;
  /// Who commits positions to Kafka under this policy.
  static constexpr commit_mode mode = commit_mode_of<checked_policy>;

  [[nodiscard]] rd_kafka_t* handle() const noexcept { return core_->handle(); }
  [[nodiscard]] const std::string& topic() const noexcept { return core_->topic(); }
  [[nodiscard]] const std::string& group_id() const noexcept { return core_->group_id(); }
  /// What the positions a sink stores for this source were read from (identified_source): the
  /// topic, and a group member's group -- each group reads every record, so two groups never
  /// share a position.
  [[nodiscard]] std::string identity() const { return core_->identity(); }
  /// Transient errors the client recovered from (retried, never skipping a record).
  [[nodiscard]] std::size_t transient_errors() const noexcept { return core_->transient_errors(); }
  [[nodiscard]] const transient_error& last_transient_error() const noexcept {
    return core_->last_transient_error();
  }
  /// Failed commits nobody waited for (librdkafka's auto-commits, lag reports).
  [[nodiscard]] std::size_t background_commit_failures() const noexcept {
    return core_->background_commit_failures();
  }
  /// Leaves in good order (a group member's partitions are revoked first, through the
  /// listener); the destructor does the same without telling the listener.
  void close() { core_->close(); }

  /// From now on, every record poll hands out has its fingerprint kept, for fingerprint().
  /// Off by default: a source that is not asked hashes nothing. (The pipeline asks when its
  /// sink keeps fingerprints beside positions: fingerprinting_sink.)
  void keep_fingerprints() noexcept { core_->keep_fingerprints(); }
  /// The fingerprint of `r`, an element of the span the last poll returned: a 64-bit FNV-1a
  /// over the message's timestamp (type and value), key and value, the same in every process.
  /// Stored beside the position after `r`, it tells a topic deleted and recreated under its
  /// name (librdkafka 2.0.2 shows no topic ids) from the one the position was read from: a
  /// partition started at that position with expect_before() reads `r`'s offset first and
  /// compares — the same record is dropped, never handed out, and reading goes on; another
  /// makes poll throw offset_reused, at every attempt, handing out nothing of the partition.
  /// Nothing is compared when the record is gone (compacted, a transaction's marker, or
  /// deleted by retention since). A start at another position, or the partition revoked or
  /// lost, forgets the expectation. Throws std::logic_error when fingerprints are not kept or
  /// `r` is not in that span.
  [[nodiscard]] std::uint64_t fingerprint(const record_type& r) const {
    return core_->fingerprint(r);
  }

  /// The consumer itself, for kafka::offset_store and kafka::lag_reports.
  [[nodiscard]] client_core& client() noexcept { return *core_; }

 protected:
  source_base(const consumer_options& o, assignment_kind kind, const settings& s,
              std::vector<partition_id> partitions = {})
      : core_(std::make_unique<consumer_core<Event, Codec>>(
            o, kind, mode, s.auto_commit_interval, checked_policy::name,
            policy_facts_v<checked_policy>.may_lose(), std::move(partitions))) {
    // Here rather than in the class: a source type that is only named compiles, and a source
    // built with a wrong codec gets this one error, not one for every member it uses.
    // sizeof first: the codec is completed here, outside the concept, so a check of its own (a
    // trivial_codec's KF3) is reported from this line and not from deep inside the concept.
    static_assert(part_rules::require<part_rules::kafka_codec_decodes,
                                      (sizeof(Codec) != 0 && decodes_v<Codec, Event>)>());
  }

  std::unique_ptr<consumer_core<Event, Codec>> core_;
};

}  // namespace detail

/// A member of the consumer group `group.id`, subscribed to `options.topic`. Inside poll, the
/// group's rebalances become the listener's calls: revoked (or lost, when the session expired
/// or max.poll.interval.ms passed) and assigned with the generation of the new assignment; a
/// partition starts exactly where `assigned` says. A listener that throws assigns nothing: the
/// exception leaves poll after rd_kafka_consumer_poll has returned (never through librdkafka's
/// C code), and the next poll delivers the assignment again.
template <class Event, class Policy, class Codec = trivial_codec<Event>>
class group_source final : public detail::source_base<Event, Policy, Codec> {
  using base = detail::source_base<Event, Policy, Codec>;

 public:
  /// `s` is the pipeline's settings: under AutoCommit its auto_commit_interval becomes
  /// librdkafka's auto.commit.interval.ms.
  explicit group_source(const consumer_options& o, const settings& s = {})
      : base(o, detail::assignment_kind::group, s) {}

  void listen(assignment_listener& l) { this->core_->listen(l); }
  void seek(partition_id k, position p) { this->core_->seek(k, p); }
  /// Up to `max` records of the partitions owned now; valid until the next poll.
  [[nodiscard]] std::span<const typename base::record_type> poll(std::size_t max) {
    return this->core_->poll(max);
  }
  [[nodiscard]] position earliest(partition_id k) const { return this->core_->earliest(k); }
  [[nodiscard]] position end(partition_id k) const { return this->core_->end(k); }
  [[nodiscard]] std::size_t partition_count() const { return this->core_->partition_count(); }
  [[nodiscard]] std::vector<partition_id> assignment() const { return this->core_->assignment(); }
  /// The generation of the assignment this member acts on (none before the first).
  [[nodiscard]] std::optional<std::int32_t> generation() const noexcept {
    return this->core_->generation();
  }

  /// The record before position `p` (>= 1) of partition k must have `fingerprint`: the next
  /// time k starts at exactly p (the listener's `assigned` answer, or seek), it is read first
  /// and compared (see source_base::fingerprint).
  void expect_before(partition_id k, position p, std::uint64_t fingerprint) {
    this->core_->expect_before(k, p, fingerprint);
  }
  /// The offsets from `p`, the position after the last record of partition k handed out, that
  /// will never hold a record: found when librdkafka reached the partition's end past `p`
  /// (under read_committed, a transaction's control marker and an aborted transaction's
  /// records take offsets and are never delivered). The pipeline moves an idle partition's
  /// position over them. Nothing when no such gap is known.
  [[nodiscard]] std::optional<gap> gap_after(partition_id k, position p) const {
    return this->core_->gap_after(k, p);
  }
};

/// A fixed set of partitions of `options.topic`, assigned manually: no group, no rebalance.
/// Each starts at its first retained message until sought.
template <class Event, class Policy, class Codec = trivial_codec<Event>>
class assigned_source final : public detail::source_base<Event, Policy, Codec> {
  using base = detail::source_base<Event, Policy, Codec>;

 public:
  assigned_source(const consumer_options& o, std::vector<partition_id> partitions,
                  const settings& s = {})
      : base(o, detail::assignment_kind::manual, s, std::move(partitions)) {}

  void seek(partition_id k, position p) { this->core_->seek(k, p); }
  [[nodiscard]] std::span<const typename base::record_type> poll(std::size_t max) {
    return this->core_->poll(max);
  }
  [[nodiscard]] position earliest(partition_id k) const { return this->core_->earliest(k); }
  [[nodiscard]] position end(partition_id k) const { return this->core_->end(k); }
  [[nodiscard]] std::size_t partition_count() const { return this->core_->partition_count(); }
  [[nodiscard]] std::vector<partition_id> assignment() const { return this->core_->assignment(); }

  /// The record before position `p` (>= 1) of partition k must have `fingerprint`: the next
  /// time k starts at exactly p (seek), it is read first and compared (see
  /// source_base::fingerprint).
  void expect_before(partition_id k, position p, std::uint64_t fingerprint) {
    this->core_->expect_before(k, p, fingerprint);
  }
  /// The offsets from `p`, the position after the last record of partition k handed out, that
  /// will never hold a record: found when librdkafka reached the partition's end past `p`
  /// (under read_committed, a transaction's control marker and an aborted transaction's
  /// records take offsets and are never delivered). The pipeline moves an idle partition's
  /// position over them. Nothing when no such gap is known.
  [[nodiscard]] std::optional<gap> gap_after(partition_id k, position p) const {
    return this->core_->gap_after(k, p);
  }
};

/// One partition of `options.topic`, assigned manually: a single-partition source, for sinks
/// that keep one position (a table per stream partition). Its records still name their
/// partition.
template <class Event, class Policy, class Codec = trivial_codec<Event>>
class partition_source final : public detail::source_base<Event, Policy, Codec> {
  using base = detail::source_base<Event, Policy, Codec>;

 public:
  partition_source(const consumer_options& o, partition_id k, const settings& s = {})
      : base(o, detail::assignment_kind::manual, s, {k}), partition_(k) {}

  void seek(position p) { this->core_->seek(partition_, p); }
  /// The record before position `p` (>= 1) must have `fingerprint`: the next time the
  /// partition starts at exactly p (seek), it is read first and compared (see
  /// source_base::fingerprint).
  void expect_before(position p, std::uint64_t fingerprint) {
    this->core_->expect_before(partition_, p, fingerprint);
  }
  [[nodiscard]] std::span<const typename base::record_type> poll(std::size_t max) {
    return this->core_->poll(max);
  }
  [[nodiscard]] position earliest() const { return this->core_->earliest(partition_); }
  [[nodiscard]] position end() const { return this->core_->end(partition_); }
  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  /// The offsets from `p`, the position after the last record handed out, that will never hold
  /// a record (see group_source::gap_after).
  [[nodiscard]] std::optional<gap> gap_after(position p) const {
    return this->core_->gap_after(partition_, p);
  }

 private:
  partition_id partition_;
};

}  // namespace commit_order::kafka
