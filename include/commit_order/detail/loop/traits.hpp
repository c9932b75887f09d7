// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/traits.hpp — what the loop derives from a configuration (private).
//
// Everything here runs only for a combination that passed every legality rule, so it may name
// whatever the rules guarantee the parts provide. Each trait switches a part of the loop on at
// compile time: a pipeline without the ability compiles to the same instructions as before.
#pragma once

#include <chrono>
#include <cstddef>
#include <type_traits>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/detail/loop/parts.hpp"
#include "commit_order/options.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/record.hpp"
#include "commit_order/steps.hpp"

namespace commit_order::detail {

/// An empty member for state a configuration does not need.
struct nothing final {};

/// The loop's part for writes handed to an executor: defined in detail/async_path.hpp, which
/// commit_order/executor.hpp includes (as do thread_pool.hpp and the manual executor). Only a
/// configuration with an executor names it as more than a declaration, so a synchronous
/// pipeline never parses the threads, locks and tasks it needs.
template <class Config>
class async_path;

/// True once async_path is defined in this translation unit (its header was included).
template <class T>
concept defined_type = requires {
  sizeof(T);
};
/// A configuration without an executor needs no support (and never asks about async_path).
template <class Config>
inline constexpr bool executor_support_v = [] {
  if constexpr (Config::has_executor) {
    return defined_type<async_path<Config>>;
  } else {
    return true;
  }
}();

/// What the loop derives from a configuration, in one place. Only instantiated for a
/// configuration that passed every rule, so it may name whatever the rules guarantee.
template <class Config>
struct loop_traits final {
  using source_type = typename Config::source_type;
  using sink_type = typename Config::sink_type;
  using policy_type = typename Config::policy_type;
  using handling = typename Config::error_handling_type;
  using event_type = event_t<source_record_t<source_type>>;
  using steps = effective_steps_t<policy_type>;
  using clock =
      std::conditional_t<Config::has_clock, typename Config::clock_type, std::chrono::steady_clock>;

  static constexpr step_order_facts facts = facts_of_v<steps>;
  static constexpr bool has_store = Config::has_store;
  static constexpr bool has_dead_letters = Config::has_dead_letters;
  /// Writes handed to an executor complete out of order; the position follows a tracker.
  static constexpr bool async = Config::has_executor;
  /// Under an executor, a position committed after the write covers only completed records.
  static constexpr bool tracked_commit =
      async && facts.uses_position_store && facts.write_durable_at < facts.position_durable_at;
  static constexpr bool auto_commit = facts.position_on_timer;
  /// A write step over a Transactional sink is one sink transaction, under every policy: a
  /// unit costs one commit and is all-or-nothing. Where the policy has no Begin of its own the
  /// write step opens and commits it; the position step keeps its place in the order.
  static constexpr bool implicit_tx =
      !facts.uses_transaction && !async && has_capability_v<sink_type, Transactional>;
  /// The unit's writes are one transaction: a failure rolls all of them back.
  static constexpr bool tx_unit = facts.uses_transaction || implicit_tx;
  /// The sink's rows are durable once flush() returns, which ends each unit's write step (and
  /// precedes the commit of a failed unit's prefix). Inside a sink transaction its commit does.
  static constexpr bool flushed_writes = flushing_sink<sink_type> && !tx_unit;
  /// Positions are kept per partition: the source is partitioned (a single-partition source
  /// is partition 0, with no per-partition bookkeeping at all).
  static constexpr bool partitioned = partitioned_source<source_type>;
  /// Partitions arrive and leave through an assignment listener.
  static constexpr bool group = group_managed_source<source_type>;
  static constexpr bool fencing =
      facts.position_in_sink && sink_part<partitioned, sink_type>::fences;
  /// The position is stored with the fingerprint of the record it follows, and recovery checks
  /// that record is still the one at its offset (a source that reused offsets is caught).
  /// (A store that keeps one position keeps its fingerprint in the single form; one that keeps
  /// a position per partition keeps partition 0's.)
  static constexpr bool checks_offsets =
      !partitioned && !async && facts.uses_position_store && fingerprinted_source<source_type> &&
      (fingerprint_store<typename Config::store_type> ||
       fingerprinting_position_store<typename Config::store_type>);
  /// Each partition's position is stored in the sink with the fingerprint of the record it
  /// follows, and a partition resumed there first reads that record again: a topic deleted and
  /// recreated under its name (every offset reused) is caught instead of read from the middle.
  static constexpr bool checks_start_record = !async && fencing &&
                                              fingerprinted_start_source<source_type> &&
                                              fingerprinting_sink<sink_type>;
  /// The same for a single-partition source that reads a record at an offset on demand (the
  /// file log): the record before the claimed position is compared in the claim's transaction.
  static constexpr bool checks_claimed_record =
      !partitioned && !async && fencing && !checks_start_record &&
      fingerprinted_source<source_type> && fingerprinting_sink<sink_type>;
  /// Positions go to the sink with the fingerprint of the record they follow.
  static constexpr bool sink_fingerprints = checks_start_record || checks_claimed_record;
  /// The same with a position store that keeps fingerprints (one request per partition: a
  /// store that commits a unit's partitions in one request is Kafka's own, whose offsets go
  /// with a deleted topic).
  static constexpr bool checks_store_start = [] {
    if constexpr (has_store && !async && !auto_commit && facts.uses_position_store &&
                  fingerprinted_start_source<source_type>)
      return fingerprinting_position_store<typename Config::store_type> &&
             !batch_position_store<typename Config::store_type>;
    else
      return false;
  }();
  /// The source keeps fingerprints of what it hands out.
  static constexpr bool source_fingerprints = checks_start_record || checks_store_start;
  /// An idle partition's read position is moved over offsets the source says will never hold a
  /// record (a transaction's marker, an aborted transaction), where the policy commits positions
  /// itself: AutoCommit's timer commits only what was read, and an executor's writes settle
  /// their positions out of order. (Whether the durable position follows: move_over.)
  static constexpr bool settles_gaps = gap_reporting_source<source_type> && !async &&
                                       !auto_commit &&
                                       (facts.position_in_sink || facts.uses_position_store);
  static constexpr bool faults_enabled = Config::has_faults;
  /// A non-transactional write followed by a position commit leaves a durable prefix behind a
  /// failed record; the position may cover exactly that prefix.
  static constexpr bool prefix_commit = !tx_unit && facts.uses_position_store &&
                                        !facts.position_on_timer &&
                                        facts.write_durable_at < facts.position_durable_at;
  /// How many more times a unit (outside a transaction: a write) the world failed is tried.
  static constexpr std::size_t world_retries = world_retries_v<handling>;
  /// Non-transactional writes retry and dead-letter per record; a transactional unit is rolled
  /// back and re-run whole, because the sink may have aborted its transaction.
  static constexpr bool per_record_handling =
      !tx_unit && (handling::retries > 0 || handling::dead_letters || world_retries > 0);
  /// Only a transactional unit that retries counts retries per failed record.
  static constexpr bool unit_retries = tx_unit && handling::retries > 0;
  static constexpr bool unit_dead_letters = tx_unit && handling::dead_letters;
  /// AutoCommit's timer is consulted at every step boundary and, outside a sink transaction,
  /// after every row. Inside one it waits for the transaction's boundary: the hazard is the same
  /// (the position already moved past rows whose transaction has not committed), and a store on
  /// a second connection to the same database could not commit under the transaction's lock.
  static constexpr bool row_timer = auto_commit && !implicit_tx;
};

}  // namespace commit_order::detail
