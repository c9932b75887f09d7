// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/offset_store.hpp — Kafka's committed offsets as the position
// store of AtLeastOnce and AtMostOnce.
//
//   kafka::offset_store            per partition (a group_source or an assigned_source)
//   kafka::partition_offset_store  the one partition of a partition_source
//
// The store commits through the source's own consumer, so the group coordinator checks this
// member and its generation on every commit: a member that lost its partitions in a rebalance
// is refused (`commit_refused`), and its records are read again by their next owner. A refusal
// because the group is rebalancing (`rebalance_refused`) is the world's and passes: the
// pipeline does not stop, it reads the unit again after the rebalance and counts it
// (`pipeline::refused_commits()`).
//   * explicit commits (every policy but AutoCommit): a unit's positions go in one request,
//     `commit(span<const start_at>)`, which returns once the coordinator accepted them all
//     (synchronous); Kafka checks the generation once per request, so a unit is never
//     committed in one partition and refused in another by a rebalance;
//   * AtMostOnce<AutoCommit>: `commit(k, p)` hands p to librdkafka's offset store, and
//     librdkafka's own auto-commit timer (enable.auto.commit=true, auto.commit.interval.ms =
//     settings.auto_commit_interval) commits it whenever it fires — asynchronously, polled
//     but maybe unwritten: the loss and the replay the type declares, for real.
// `load(k)` reads the group's committed offset (none: empty). Durability: Replicated — the
// broker replicates the offsets topic; this process keeps nothing. (So rule R9a refuses it
// under AtLeastOnce with a sink less durable than that, such as one machine's SQLite file: a
// lost machine would take rows whose position Kafka still vouches for. Keep the position in
// such a sink's transaction instead: TransactionalPosition.)
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <type_traits>

#include "commit_order/adapters/kafka/detail/consumer_core.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/adapters/kafka/source.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::kafka {

namespace detail {
/// S is a group_source or an assigned_source: a consumer kafka::offset_store commits through.
template <class S>
concept group_client_source = requires(S& s) {
  s.client();
  s.assignment();
};
}  // namespace detail

/// Kafka's committed offsets, one per partition, of the source's consumer group.
class offset_store final {
 public:
  using capabilities = commit_order::capabilities<Replicated>;
  /// A group rebalancing refuses commits (rebalance_refused): the pipeline goes on.
  static constexpr bool interruptible_commits = true;

  /// The store of `source`'s group (group.id is required). Keeps a reference: the source must
  /// outlive it.
  template <class Source>
  requires(!std::is_same_v<std::remove_cv_t<Source>, offset_store>) explicit offset_store(
      Source& source)
      : client_(client_of(source)) {
    static_assert(part_rules::require<part_rules::kafka_offset_store_source,
                                      detail::group_client_source<Source>>());
    if (client_->group_id().empty())
      throw configuration_refused(
          "commit_order::kafka::offset_store: the source has no group.id, and Kafka keeps "
          "committed offsets per consumer group -- set group.id");
  }

  [[nodiscard]] std::optional<position> load(partition_id k) const { return client_->committed(k); }

  void commit(partition_id k, position p) {
    const start_at one{k, p};
    commit(std::span(&one, 1));
  }

  /// A unit's positions over several partitions, in one request (batch_position_store): the
  /// coordinator accepts or refuses them together. Refused because the group is rebalancing:
  /// `rebalance_refused`, which the pipeline takes as the world's (it goes on, and counts it
  /// in refused_commits()); refused otherwise: `commit_refused`, with each partition's outcome.
  void commit(std::span<const start_at> positions) {
    if (positions.empty())
      return;
    if (client_->mode() == commit_mode::auto_commit) {
      for (const start_at& s : positions)
        client_->store_for_auto_commit(s.partition, s.at);
    } else {
      ++requests_;
      client_->commit_sync(positions);
    }
    commits_ += positions.size();
  }

  /// Positions handed to commit() so far.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }
  /// Commit requests sent to the coordinator so far (explicit commits: one per unit).
  [[nodiscard]] std::size_t requests() const noexcept { return requests_; }

 private:
  // None once the constructor's check refused the source, so that its message is the one error.
  template <class Source>
  static detail::client_core* client_of(Source& source) {
    if constexpr (detail::group_client_source<Source>) {
      return &source.client();
    } else {
      return nullptr;
    }
  }

  detail::client_core* client_;
  std::size_t commits_ = 0;
  std::size_t requests_ = 0;
};

/// Kafka's committed offset of the one partition a partition_source reads.
class partition_offset_store final {
 public:
  using capabilities = commit_order::capabilities<Replicated>;

  template <class Event, class Policy, class Codec>
  explicit partition_offset_store(partition_source<Event, Policy, Codec>& source)
      : client_(&source.client()), partition_(source.partition()) {
    if (client_->group_id().empty())
      throw configuration_refused(
          "commit_order::kafka::partition_offset_store: the source has no group.id, and Kafka "
          "keeps committed offsets per consumer group -- set group.id");
  }

  [[nodiscard]] std::optional<position> load() const { return client_->committed(partition_); }

  void commit(position p) {
    if (client_->mode() == commit_mode::auto_commit) {
      client_->store_for_auto_commit(partition_, p);
    } else {
      client_->commit_sync(partition_, p);
    }
    ++commits_;
  }

  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }

 private:
  detail::client_core* client_;
  partition_id partition_;
  std::size_t commits_ = 0;
};

}  // namespace commit_order::kafka
