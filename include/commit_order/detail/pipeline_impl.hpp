// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/pipeline_impl.hpp — the loop behind `pipeline` (private).
//
// Everything here runs only for a combination that passed every legality rule, so it may call
// whatever the rules guarantee the parts provide.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/detail/chrono.hpp"
#include "commit_order/detail/iterator.hpp"
#include "commit_order/detail/position_access.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/observer.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/progress.hpp"
#include "commit_order/record.hpp"
#include "commit_order/steps.hpp"

// The loop's layers (unit, step, record) must fold into one function, as the hand-written loop
// is one; the inliner's size heuristics would otherwise stop at a layer boundary and the
// per-record cost would show it (bench/overhead.cpp measures exactly this).
#if defined(__GNUC__) || defined(__clang__)
#define COMMIT_ORDER_INLINE inline __attribute__((always_inline))
#else
#define COMMIT_ORDER_INLINE inline
#endif

namespace commit_order::detail {

/// An empty member for state a configuration does not need.
struct nothing final {};

/// The loop takes one shape or another where g++ and clang allocate registers differently
/// (measured, see pipeline_impl::rows_apart).
inline constexpr bool compiled_by_clang =
#if defined(__clang__)
    true;
#else
    false;
#endif

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
  /// Positions are kept per partition: the source is partitioned (a single-partition source
  /// is partition 0, with no per-partition bookkeeping at all).
  static constexpr bool partitioned = partitioned_source<source_type>;
  /// Partitions arrive and leave through an assignment listener.
  static constexpr bool group = group_managed_source<source_type>;
  static constexpr bool fencing = facts.position_in_sink && fences<partitioned, sink_type>;
  /// The position is stored with the fingerprint of the record it follows, and recovery checks
  /// that record is still the one at its offset (a source that reused offsets is caught).
  static constexpr bool checks_offsets = !partitioned && !async && facts.uses_position_store &&
                                         fingerprinted_source<source_type> &&
                                         fingerprint_store<typename Config::store_type>;
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

namespace surface {
template <class P>
struct policy_view {
  using steps = step_list<>;
  using guarantee = MayLoseAndDuplicate;
};
template <policy P>
struct policy_view<P> {
  using steps = effective_steps_t<P>;
  using guarantee = guarantee_t<P>;
};
}  // namespace surface

/// Stands in for the loop of an illegal pipeline, so the rule's static_assert is the only
/// error: it accepts any constructor arguments and offers the whole public surface of
/// `pipeline_impl` (checked by tests/compile_fail/cases/rejected_surface.cpp).
template <class Config>
class rejected_pipeline {
 public:
  using source_type = typename Config::source_type;
  using sink_type = typename Config::sink_type;
  using policy_type = typename Config::policy_type;
  using store_type = typename Config::store_type;
  using observer_type = typename Config::observer_type;
  using faults_type = typename Config::faults_type;
  using dead_letters_type = typename Config::dead_letters_type;
  using executor_type = typename Config::executor_type;
  using steps = typename surface::policy_view<policy_type>::steps;
  using guarantee = typename surface::policy_view<policy_type>::guarantee;

  template <class... Args>
  explicit rejected_pipeline(Args&&...) {}
  position recover() { return position{}; }
  std::size_t poll_once() { return 0; }
  std::size_t run() { return 0; }
  [[nodiscard]] position read_position(partition_id = partition_id{0}) const { return {}; }
  [[nodiscard]] position committed_position(partition_id = partition_id{0}) const { return {}; }
  [[nodiscard]] commit_order::progress progress(partition_id = partition_id{0}) const { return {}; }
  [[nodiscard]] std::vector<commit_order::progress> partitions() const { return {}; }
  [[nodiscard]] std::size_t refused_commits() const noexcept { return 0; }
  [[nodiscard]] observer_type& observer() noexcept { return observer_; }
  [[nodiscard]] const observer_type& observer() const noexcept { return observer_; }
  [[nodiscard]] faults_type& faults() noexcept { return faults_; }

 private:
  [[no_unique_address]] observer_type observer_{};
  [[no_unique_address]] faults_type faults_{};
};

template <class Config>
class pipeline_impl {
  using traits = loop_traits<Config>;
  using Source = typename Config::source_type;
  using Sink = typename Config::sink_type;
  using Policy = typename Config::policy_type;

 public:
  using source_type = Source;
  using sink_type = Sink;
  using policy_type = Policy;
  using store_type = typename Config::store_type;
  using observer_type = typename Config::observer_type;
  using faults_type = typename Config::faults_type;
  using dead_letters_type = typename Config::dead_letters_type;
  using executor_type = typename Config::executor_type;
  using steps = typename traits::steps;
  using guarantee = guarantee_t<Policy>;

 private:
  using Store = store_type;
  using DeadLetters = dead_letters_type;
  using Clock = typename traits::clock;
  using Transform = typename Config::transform_type;
  using Handling = typename Config::error_handling_type;
  using time_point = typename Clock::time_point;
  using Executor = executor_type;
  using Event = typename traits::event_type;

  static constexpr step_order_facts facts = traits::facts;
  static constexpr bool has_store = traits::has_store;
  static constexpr bool has_dead_letters = traits::has_dead_letters;
  static constexpr bool async = traits::async;
  static constexpr bool tracked_commit = traits::tracked_commit;
  static constexpr bool auto_commit = traits::auto_commit;
  static constexpr bool implicit_tx = traits::implicit_tx;
  static constexpr bool tx_unit = traits::tx_unit;
  static constexpr bool partitioned = traits::partitioned;
  static constexpr bool group = traits::group;
  static constexpr bool fencing = traits::fencing;
  static constexpr bool checks_offsets = traits::checks_offsets;
  static constexpr bool checks_start_record = traits::checks_start_record;
  static constexpr bool checks_claimed_record = traits::checks_claimed_record;
  static constexpr bool sink_fingerprints = traits::sink_fingerprints;
  static constexpr bool checks_store_start = traits::checks_store_start;
  static constexpr bool source_fingerprints = traits::source_fingerprints;
  static constexpr bool settles_gaps = traits::settles_gaps;
  // A gap moved over is made durable where no fingerprint would be lost (see move_over).
  static constexpr bool durable_gap_moves =
      settles_gaps && !sink_fingerprints && !checks_store_start && !checks_offsets;
  static constexpr bool faults_enabled = traits::faults_enabled;
  static constexpr bool prefix_commit = traits::prefix_commit;
  static constexpr bool per_record_handling = traits::per_record_handling;
  static constexpr bool row_timer = traits::row_timer;
  // A store whose commit the world may interrupt (a group rebalancing): the loop handles that
  // refusal (commit_interrupted) instead of stopping.
  static constexpr bool interruptible = [] {
    if constexpr (has_store)
      return interruptible_commits_v<Store>;
    else
      return false;
  }();
  // Thrown past the rest of a unit whose position commit was interrupted; never leaves
  // poll_once (it is no std::exception, so no failure handling takes it for a record's).
  struct unit_abandoned final {};

  /// One record of a unit, as failure handling names it.
  struct record_ref {
    partition_id partition;
    offset at;
    friend bool operator==(const record_ref&, const record_ref&) = default;
  };

  /// The last run of offsets holding no record a partition's position moved over.
  struct moved_gap {
    position from;
    position to;
  };

  /// What the loop keeps per partition of a partitioned source.
  struct partition_entry {
    partition_id id;
    position read;
    position committed;
    std::optional<epoch> owner;  ///< the epoch claimed for it (fencing)
    [[no_unique_address]] std::conditional_t<settles_gaps, moved_gap, nothing> gap{};
  };

 public:
  /// `pipeline(source, sink, extras...)`: the extras are the parts the options name — the
  /// position store, the dead-letter sink, the executor — and `settings`, in any order.
  /// `pipeline`'s own constructor refuses every misuse with a message before this runs; here an
  /// argument that does not fit is ignored, so that message is the only error.
  template <class... Args>
  explicit pipeline_impl(Args&&... args) {
    bind_all(std::forward<Args>(args)...);
    // The sink's positions vouch for this source's records: bound to it, a position stored for
    // another source (another topic, another group) is refused at the claim.
    if constexpr (facts.position_in_sink && identified_source<Source> && source_bound_sink<Sink>)
      sink_->bind_source(source_->identity());
    // So do a position store's: bound to the sink's table and the source, a position another
    // consumer stored under the same stream name is refused rather than read from.
    if constexpr (has_store)
      bind_store();
    validate(settings_);
    configured_limit_ = configured_limit(settings_);
    // A batch never holds more than batch_size records: a configured limit at or above it can
    // never split one.
    split_above_ = configured_limit_ < settings_.batch_size ? configured_limit_ : 0;
    if constexpr (group)
      listener_.self = this;
  }

  pipeline_impl(const pipeline_impl&) = delete;
  pipeline_impl& operator=(const pipeline_impl&) = delete;

  /// Writes handed to an executor finish (or are abandoned) before the pipeline goes away.
  ~pipeline_impl() {
    if constexpr (async)
      wait_idle();
  }

  /// Loads the stored position — from the sink, inside a transaction, under a policy that keeps
  /// it there (claiming it on a fencing sink); from the position store otherwise — checks it
  /// against what the source retains, and seeks there. A consumer with no stored position
  /// starts at `settings::initial_position`, or at the earliest retained record when that is
  /// unset. A partitioned source's partitions are each recovered so; a group-managed source's
  /// arrive through its assignment instead, and are recovered as they are assigned.
  /// Returns the (first) partition's start position.
  /// Throws `position_lost`, `position_beyond_end`, `invariant_violation` or `fenced`.
  position recover() {
    if constexpr (async)
      async_.restart();  // what an earlier run handed out has finished or been abandoned
    position first_start{};
    if constexpr (source_fingerprints)
      source_->keep_fingerprints();
    if constexpr (group) {
      // Partitions come with the assignment, inside poll: nothing of an earlier assignment is
      // trusted (a failed poll may have left it half done), the source re-delivers it.
      parts_.clear();
      source_->listen(listener_);
    } else if constexpr (partitioned) {
      std::vector<partition_id> owned;
      for (const auto& k : source_->assignment())
        owned.push_back(partition_id(k));
      std::ranges::sort(owned);
      parts_.clear();
      const auto starts = claim_and_check(owned, std::nullopt);
      for (const start_at& s : starts)
        source_->seek(s.partition, s.at);
      if (!starts.empty())
        first_start = starts.front().at;
    } else {
      const partition_id only{0};
      const auto starts = claim_and_check(std::span(&only, 1), std::nullopt);
      first_start = starts.front().at;
      source_->seek(first_start);
    }
    if constexpr (auto_commit)
      last_auto_commit_ = Clock::now();
    recovered_ = true;
    return first_start;
  }

  /// One Poll, then the rest of the policy's steps over each unit of work in the batch (the
  /// batch, or its splits). Returns the number of records handled; 0 when there was nothing new.
  /// After any exception the next call recovers from the durable position first.
  std::size_t poll_once() {
    if (!recovered_)
      recover();
    try {
      if constexpr (async)
        settle_failures();
      auto&& batch = source_->poll(settings_.batch_size);
      const auto n = static_cast<std::size_t>(std::ranges::size(batch));
      if (n == 0) {
        if constexpr (async)
          finish_in_flight();
        settle_gaps();
        return 0;
      }
      auto first = std::ranges::begin(batch);
      const auto last = first + static_cast<std::ptrdiff_t>(n);
      // The batch's end is read through `last`, which the write loop needs anyway (indexing
      // `first` would be a second address computation).
      position batch_end;
      if constexpr (partitioned) {
        note_read(first, last);
        batch_end = position::after(offset_of(*(last - 1)));
      } else {
        read_ = batch_end = position::after(offset_of(*(last - 1)));
      }
      notify<events::polled>(n, batch_end);
      tick();
      if constexpr (interruptible) {
        try {
          process_batch(first, last, n, batch_end);
        } catch (const unit_abandoned&) {
          // The store refused a unit's commit while the world changed (commit_interrupted):
          // the batch's records from that unit on are read again from the store's positions,
          // recovered at the next poll, once the source has settled.
          recovered_ = false;
          return n;
        }
      } else {
        process_batch(first, last, n, batch_end);
      }
      settle_gaps();
      return n;
    } catch (...) {
      recovered_ = false;
      throw;
    }
  }

  /// Polls until the source has nothing more to give; returns the records handled.
  std::size_t run() {
    std::size_t total = 0;
    while (const std::size_t n = poll_once())
      total += n;
    return total;
  }

  /// Where the next poll of partition `k` reads (the only partition, 0, of a single-partition
  /// source).
  [[nodiscard]] position read_position(partition_id k = partition_id{0}) const noexcept {
    if constexpr (partitioned) {
      const partition_entry* e = find(k);
      return e != nullptr ? e->read : position{};
    } else {
      (void)k;
      return read_;
    }
  }
  /// The last position of partition `k` made durable (in the store, or in the sink's
  /// transaction).
  [[nodiscard]] position committed_position(partition_id k = partition_id{0}) const noexcept {
    if constexpr (partitioned) {
      const partition_entry* e = find(k);
      return e != nullptr ? e->committed : position{};
    } else {
      (void)k;
      return committed_;
    }
  }

  /// Partition `k`'s read and committed positions, the sink's applied watermark for it and the
  /// source's end.
  [[nodiscard]] commit_order::progress progress(partition_id k = partition_id{0}) const {
    commit_order::progress p{read_position(k), committed_position(k), std::nullopt, source_end(k),
                             k};
    if constexpr (has_watermark<partitioned, Sink>) {
      p.applied_watermark = sink_watermark<partitioned>(*sink_, k);
      p.reports_watermark = true;
      if constexpr (!facts.may_lose()) {
        // A position made durable only after the write vouches for everything before it,
        // offsets that hold no record included (a gap moved over, before a restart).
        const position durable = p.committed;
        if (durable.value() > 0 &&
            (!p.applied_watermark || position::after(*p.applied_watermark) < durable))
          p.applied_watermark = offset{durable.value() - 1};
      }
    }
    if constexpr (settles_gaps) {
      moved_gap g{};
      if constexpr (partitioned) {
        if (const partition_entry* e = find(k))
          g = e->gap;
      } else {
        g = gap_;
      }
      if (g.to == p.read && g.from < g.to)
        p.records_end = g.from;
    }
    return p;
  }

  /// The progress of every partition this consumer owns, in ascending partition order.
  [[nodiscard]] std::vector<commit_order::progress> partitions() const {
    std::vector<commit_order::progress> all;
    if constexpr (partitioned) {
      for (const partition_entry& e : parts_)
        all.push_back(progress(e.id));
    } else {
      all.push_back(progress());
    }
    return all;
  }

  /// Units whose position commit the store refused because the world was changing under it
  /// (`commit_interrupted`: a consumer group rebalancing). Each was read again, never skipped;
  /// 0 for a store that cannot be interrupted.
  [[nodiscard]] std::size_t refused_commits() const noexcept {
    if constexpr (interruptible)
      return refused_commits_;
    else
      return 0;
  }

  [[nodiscard]] observer_type& observer() noexcept { return observer_; }
  [[nodiscard]] const observer_type& observer() const noexcept { return observer_; }
  [[nodiscard]] faults_type& faults() noexcept { return faults_; }

 private:
  // ---- positions: claim, load, check --------------------------------------------------------

  position source_end(partition_id k) const {
    if constexpr (partitioned) {
      return source_->end(k);
    } else {
      (void)k;
      return source_->end();
    }
  }
  position source_earliest(partition_id k) const {
    if constexpr (partitioned) {
      return source_->earliest(k);
    } else {
      (void)k;
      return source_->earliest();
    }
  }

  // Loads (and, on a fencing sink, claims) the positions of `owned`, in ascending partition
  // order and, where the position lives in the sink, in one transaction; checks each against
  // what the source retains; records them; returns where each starts. `generation` is the
  // group's, for a group-managed source.
  std::vector<start_at> claim_and_check(std::span<const partition_id> owned,
                                        std::optional<std::int32_t> generation) {
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
              stored = sink_claim<partitioned>(*sink_, k, *wanted);
              owners[i] = *wanted;
            } else {
              const claimed c = sink_claim_next<partitioned>(*sink_, k);
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
            stored = sink_load<partitioned>(*sink_, k);
          }
          position earliest{};
          const position start = checked_start(k, stored, &earliest);
          if constexpr (checks_start_record) {
            // The record before the position is still retained, or there is nothing to compare.
            if (!(earliest < start))
              after[i].reset();
          }
          if constexpr (has_watermark<partitioned, Sink> && facts.write_with_position) {
            // Rows and position commit together, so no row can be newer than the position. (An
            // order that writes outside the transaction legitimately leaves newer rows behind a
            // crash: it replays them, and this check does not apply.)
            const std::optional<offset> watermark = sink_watermark<partitioned>(*sink_, k);
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
        const std::optional<position> stored = store_load<partitioned>(*store_, k);
        position earliest{};
        const position start = checked_start(k, stored, &earliest);
        if constexpr (checks_store_start) {
          // Compared only while the record before the position is retained.
          if (stored && earliest < start)
            after[i] = store_->loaded_fingerprint();
        }
        if constexpr (checks_offsets) {
          if (stored)
            check_not_reused(*stored, store_->load_fingerprint());
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
        if constexpr (partitioned)
          source_->expect_before(starts[i].partition, starts[i].at, *after[i]);
        else
          source_->expect_before(starts[i].at, *after[i]);
      }
    }
    return starts;
  }

  // Where partition `k` starts, given what was stored for it: never below what the source
  // retains (records were deleted unapplied) and never past its end.
  position checked_start(partition_id k, std::optional<position> stored,
                         position* earliest_out = nullptr) const {
    const position earliest = source_earliest(k);
    if (earliest_out != nullptr)
      *earliest_out = earliest;
    const position end = source_end(k);
    const position start = stored.value_or(settings_.initial_position.value_or(earliest));
    // Reading on from `earliest` instead would silently skip everything in between.
    if (start < earliest)
      throw position_lost(k, start, earliest);
    if (start > end)
      throw position_beyond_end(k, start, end);
    return start;
  }

  // The record before a stored position must be the one the position was committed after.
  void check_not_reused(position stored, std::optional<std::uint64_t> expected) {
    if (!expected || stored.value() == 0 || stored <= source_earliest(partition_id{0}))
      return;  // nothing to compare with: no fingerprint, or the record is not retained
    const offset before{stored.value() - 1};
    const std::optional<std::uint64_t> found = source_->fingerprint_at(before);
    if (found && *found != *expected)
      throw offset_reused(partition_id{0}, before, *expected, *found);
  }

  // The partition now starts at `s` and belongs to this consumer at `owner`.
  void take(const start_at& s, std::optional<epoch> owner) {
    if constexpr (partitioned) {
      partition_entry& e = entry(s.partition);
      e.read = e.committed = s.at;
      e.owner = owner;
    } else {
      read_ = committed_ = s.at;
      if constexpr (fencing)
        owner_ = owner;
    }
    if constexpr (async)
      async_.reset(s.partition, s.at);
  }

  // ---- gaps: offsets that will never hold a record ----------------------------------------

  // Each partition with nothing in flight whose next record the source knows can come no sooner
  // than a later position (a read_committed consumer never receives a transaction's marker or
  // an aborted transaction's records, yet they take offsets) has its read position moved there.
  // Left on the marker, progress would count offsets as records still to read, forever.
  void settle_gaps() {
    if constexpr (settles_gaps && partitioned) {
      for (std::size_t i = 0; i < parts_.size(); ++i) {
        partition_entry& e = parts_[i];
        if (!idle(e.read, e.committed, e.gap))
          continue;
        if (const std::optional<gap> g = source_->gap_after(e.id, e.read))
          move_over(e.id, e.read, e.committed, e.gap, *g);
      }
    } else if constexpr (settles_gaps) {
      if (!idle(read_, committed_, gap_))
        return;
      if (const std::optional<gap> g = source_->gap_after(read_))
        move_over(partition_id{0}, read_, committed_, gap_, *g);
    }
  }

  // Nothing of the partition is in flight: everything read is durable, or all that was read
  // past the durable position is a gap moved over.
  static bool idle(position read, position committed, const moved_gap& last) noexcept {
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
  void move_over(partition_id k, position& read, position& committed, moved_gap& last,
                 const gap& g) {
    if constexpr (durable_gap_moves) {
      if constexpr (facts.position_in_sink) {
        sink_->begin();
        tx_open_ = true;
        try {
          if constexpr (fencing)
            sink_store<partitioned>(*sink_, k, g.end, owner_for(k));
          else
            sink_store<partitioned>(*sink_, k, g.end);
          sink_->commit();
          tx_open_ = false;
        } catch (...) {
          tx_open_ = false;
          roll_back_after_failure();
          throw;
        }
      } else {
        try {
          if constexpr (partitioned && batch_position_store<Store>) {
            const start_at s{k, g.end};
            store_->commit(std::span<const start_at>(&s, 1));
          } else {
            store_commit<partitioned>(*store_, k, g.end);
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

  // The epoch partition k was claimed at (fencing).
  epoch owner_for(partition_id k) const {
    if constexpr (partitioned)
      return owner_of(k);
    else
      return *owner_;
  }

  // ---- a group-managed source's assignment --------------------------------------------------

  // Called by the source inside poll: no unit is open then (a batch is processed whole before
  // the next poll), so an orderly revoke only has to make durable what was read and written.
  struct listener final : assignment_listener {
    pipeline_impl* self = nullptr;
    std::vector<start_at> assigned(std::span<const partition_id> partitions,
                                   std::int32_t generation) override {
      return self->on_assigned(partitions, generation);
    }
    void revoked(std::span<const partition_id> partitions) override {
      self->on_revoked(partitions);
    }
    void lost(std::span<const partition_id> partitions) override { self->on_lost(partitions); }
  };

  std::vector<start_at> on_assigned(std::span<const partition_id> partitions,
                                    std::int32_t generation) {
    std::vector<partition_id> sorted(partitions.begin(), partitions.end());
    std::ranges::sort(sorted);
    if constexpr (auto_commit)
      last_auto_commit_ = Clock::now();
    return claim_and_check(sorted, generation);
  }

  void on_revoked(std::span<const partition_id> partitions) {
    if constexpr (async) {
      // Writes of these partitions still in flight finish first; what completed is committed.
      wait_idle();
      settle_failures();
    }
    for (const partition_id k : partitions) {
      partition_entry* e = find(k);
      if (e == nullptr)
        continue;
      if constexpr (tracked_commit) {
        async_.commit_completed(*this, *e);
      } else if constexpr (facts.uses_position_store) {
        // Everything read of it has been handled: AutoCommit's timer may lag behind the read
        // position, and an orderly hand-over makes it durable (as Kafka's commit on revoke).
        if constexpr (auto_commit) {
          if (e->committed < e->read) {
            store_commit<partitioned>(*store_, k, e->read);
            e->committed = e->read;
          }
        }
      }
      forget(k);
    }
  }

  void on_lost(std::span<const partition_id> partitions) {
    // Another member may own them already: nothing is stored, the state is dropped.
    if constexpr (async)
      wait_idle();
    for (const partition_id k : partitions)
      forget(k);
  }

  void forget(partition_id k) {
    std::erase_if(parts_, [k](const partition_entry& e) { return e.id == k; });
    if constexpr (async)
      async_.forget(k);
  }

  // ---- per-partition bookkeeping ------------------------------------------------------------

  const partition_entry* find(partition_id k) const noexcept {
    for (const partition_entry& e : parts_)
      if (e.id == k)
        return &e;
    return nullptr;
  }
  partition_entry* find(partition_id k) noexcept {
    for (partition_entry& e : parts_)
      if (e.id == k)
        return &e;
    return nullptr;
  }
  partition_entry& entry(partition_id k) {
    if (partition_entry* e = find(k))
      return *e;
    const auto at = std::ranges::lower_bound(parts_, k, {}, &partition_entry::id);
    return *parts_.insert(at, partition_entry{k, {}, {}, {}});
  }

  template <class It>
  void note_read(It first, It last) {
    for (It it = first; it != last; ++it)
      entry(partition_of(*it)).read = position::after(offset_of(*it));
  }

  // The position each partition a unit touched moves to, in ascending partition order: the
  // position step stores them in that order (the same lock order in every consumer).
  template <class It>
  void mark_unit(It first, It last) {
    unit_ends_.clear();
    for (It it = first; it != last; ++it) {
      const partition_id k = partition_of(*it);
      const position next = position::after(offset_of(*it));
      auto found = std::ranges::find(unit_ends_, k, &start_at::partition);
      if (found == unit_ends_.end()) {
        unit_ends_.push_back(start_at{k, next});
      } else {
        found->at = next;
      }
    }
    std::ranges::sort(unit_ends_, {}, &start_at::partition);
  }

  // ---- units of work ------------------------------------------------------------------------

  // The largest unit the static limit and the settings allow, computed once (no limit: max).
  static std::size_t configured_limit(const settings& s) noexcept {
    std::size_t limit = static_cast<std::size_t>(-1);
    if constexpr (max_transaction_rows_v<Sink> != 0)
      limit = max_transaction_rows_v<Sink>;
    if (s.max_transaction_rows != 0)
      limit = std::min(limit, s.max_transaction_rows);
    return limit;
  }

  // Whether a limit may split a batch of `n` records. The hot path asks only this; while
  // neither the sink's run-time limit nor the configured one can split a batch it is one test
  // (a hand-written loop's test of the run-time limit), and the split path decides exactly.
  COMMIT_ORDER_INLINE bool may_split(std::size_t n) const {
    if constexpr (std::is_same_v<typename Policy::trigger, EveryRecord>) {
      return n > 1;
    } else if constexpr (runtime_limited_sink<Sink>) {
      (void)n;
      return (sink_->max_transaction_rows() | split_above_) != 0;  // 0: no limit
    } else {
      return n > configured_limit_;
    }
  }

  // A polled batch: one unit, or the units a limit splits it into.
  template <class It>
  COMMIT_ORDER_INLINE void process_batch(It first, It last, std::size_t n, position batch_end) {
    if (may_split(n)) [[unlikely]] {
      process_splits(first, n);
    } else {
      process_unit(first, last, n, batch_end);
    }
  }

  // A batch a limit may split, in units of the largest size allowed (one unit when none is
  // exceeded). Out of line: its loop would otherwise hold registers across the common path.
  template <class It>
  [[gnu::noinline]] void process_splits(It first, std::size_t n) {
    const std::size_t unit = unit_limit();
    for (std::size_t done = 0; done < n;) {
      const std::size_t len = std::min(unit, n - done);
      const auto unit_first = first + static_cast<std::ptrdiff_t>(done);
      const auto unit_last = unit_first + static_cast<std::ptrdiff_t>(len);
      process_unit(unit_first, unit_last, len, position::after(offset_of(*(unit_last - 1))));
      done += len;
    }
  }

  // The largest unit allowed now: the configured limit, or the sink's run-time one when it is
  // lower.
  std::size_t unit_limit() const {
    if constexpr (std::is_same_v<typename Policy::trigger, EveryRecord>) {
      return 1;
    } else if constexpr (runtime_limited_sink<Sink>) {
      const std::size_t n = sink_->max_transaction_rows();
      return n != 0 && n < configured_limit_ ? n : configured_limit_;
    } else {
      return configured_limit_;
    }
  }

  template <class It>
  COMMIT_ORDER_INLINE void process_unit(It first, It last, std::size_t count, position unit_end) {
    if constexpr (partitioned)
      mark_unit(first, last);
    // Only fault points need to number units; otherwise the counter does not exist.
    std::size_t unit_index = 0;
    if constexpr (faults_enabled)
      unit_index = units_started_++;
    // Each failed record gets its own retries, however many re-runs of the unit it takes.
    // Only a transactional unit that retries needs the count; elsewhere it does not exist.
    static constexpr bool unit_retries = traits::unit_retries;
    [[maybe_unused]] std::conditional_t<unit_retries,
                                        std::vector<std::pair<record_ref, std::size_t>>, nothing>
        retries_used{};
    if constexpr (traits::unit_dead_letters)
      skipped_.clear();
    // Where the write loop starts the unit, the failure path finds the unit's first record from
    // its end and this count, so the loop does not keep `first` in a register beside its own
    // iterator (a hand-written loop keeps no such copy, and the extra live value pushed the
    // unit's end position to the stack). Where the position is committed first (AtMostOnce),
    // registers run short at that commit, where `first` is needed anyway: the count would only
    // cost a store (measured with callgrind, bench/overhead.cpp).
    static constexpr bool first_from_count = !facts.may_lose();
    if constexpr (first_from_count)
      unit_size_ = count;
    else
      (void)count;
    [[maybe_unused]] std::size_t world_tries = 0;
    for (;;) {
      try {
        run_unit(first, last, unit_end, unit_index, std::make_index_sequence<steps::size - 1>{});
        return;
      } catch (const std::exception& e) {
        if constexpr (first_from_count)
          first = last - static_cast<std::ptrdiff_t>(unit_size_);
        if constexpr (traits::world_retries > 0) {
          // The world's failure, not a record's: the unit (rolled back, if it is a transaction)
          // is run again after a wait, its position held. A write outside a transaction was
          // tried again in place already, and is not tried again here.
          const bool in_place = std::exchange(world_spent_, false);
          if (!failed_ && !in_place && world_may_pass(e) && world_tries < traits::world_retries) {
            wait_for_world(++world_tries);
            continue;
          }
        }
        // Only a record's failure is handled here; a failing begin, commit or position store is
        // not the record's fault and propagates as it is (after the rollback in run_unit) --
        // unless the sink names the record whose row failed there (row_failed: a sink that
        // sends a unit's rows together learns of a row's failure only then).
        if (!failed_)
          failed_ = deferred_failure(first, last, e);
        if (!failed_)
          throw;
        const record_ref bad = *failed_;
        failed_.reset();  // set again by the next record that fails
        if constexpr (unit_retries) {
          auto used = std::find_if(retries_used.begin(), retries_used.end(),
                                   [&](const auto& r) { return r.first == bad; });
          if (used == retries_used.end())
            used = retries_used.insert(retries_used.end(), {bad, 0});
          if (used->second < Handling::retries) {
            notify_retry(bad.at, ++used->second);
            continue;
          }
        }
        if constexpr (tx_unit) {
          if constexpr (Handling::dead_letters) {
            for (It it = first; it != last; ++it) {
              if (ref_of(*it) == bad)
                put_dead_letter(bad, event_of(*it), e.what());
            }
            skipped_.push_back(bad);
            continue;  // re-run the unit without the dead-lettered record
          }
        }
        give_up(first, last, bad, e);
      }
    }
  }

  template <class R>
  static record_ref ref_of(const R& r) noexcept {
    return record_ref{partition_of(r), offset_of(r)};
  }

  // The record a sink's row_failed names, if it is one of this unit's: a name outside the unit
  // is not this unit's to retry or dead-letter, and propagates as it is.
  template <class It>
  static std::optional<record_ref> deferred_failure(It first, It last, const std::exception& e) {
    const auto* deferred = dynamic_cast<const row_failed*>(&e);
    if (deferred == nullptr)
      return std::nullopt;
    const record_ref named{deferred->partition(), deferred->at()};
    for (It it = first; it != last; ++it)
      if (ref_of(*it) == named)
        return named;
    return std::nullopt;
  }

  // Called inside the handler of the record's exception, which it nests into record_failed.
  template <class It>
  [[noreturn]] void give_up(It first, It last, record_ref bad, const std::exception& e) {
    if constexpr (prefix_commit) {
      // The records before `bad` are durable: cover them, so a restart resumes at `bad`. Never
      // past it: the partial batch must not be committed over the gap.
      if constexpr (partitioned) {
        It prefix_end = first;
        while (prefix_end != last && !(ref_of(*prefix_end) == bad))
          ++prefix_end;
        mark_unit(first, prefix_end);
        // A partition with no record before the failed one keeps its durable position: what
        // lies between it and the failed record holds no record (offsets a gap or compaction
        // left), and a position moved there would be stored without the fingerprint of the
        // record it follows, which a restart checks.
        std::erase_if(unit_ends_,
                      [&](const start_at& s) { return !(entry(s.partition).committed < s.at); });
        try {
          commit_unit(first, prefix_end, position{});
        } catch (const std::exception& x) {
          // The prefix need not be covered: refused while the group rebalances, it is read
          // again and absorbed. The record's failure is what this unit reports.
          if (!interruptible || dynamic_cast<const commit_interrupted*>(&x) == nullptr)
            throw;
          if constexpr (interruptible)
            ++refused_commits_;
        }
      } else {
        // Just after the last record before `bad`, with its fingerprint where positions keep
        // one; with no record before it, the durable position stays (see above).
        It prefix_end = first;
        while (prefix_end != last && !(ref_of(*prefix_end) == bad))
          ++prefix_end;
        if (prefix_end != first) {
          const auto& before = *(prefix_end - 1);
          const position to = position::after(offset_of(before));
          if (committed_ < to) {
            if constexpr (checks_offsets)
              store_->commit(to, source_->fingerprint(before));
            else if constexpr (checks_store_start)
              store_->commit(partition_id{0}, to, source_->fingerprint(before));
            else
              store_commit<partitioned>(*store_, bad.partition, to);
            committed_ = to;
          }
        }
      }
    } else if constexpr (tx_unit && facts.may_lose()) {
      // The position went first (AtMostOnce) and the unit's transaction was rolled back with
      // the failed record: the records before it are written again, in a transaction of their
      // own, so only the failed record and what follows it are lost, as the error says.
      write_before(first, last, bad);
    } else {
      (void)first;
      (void)last;
    }
    notify<events::record_failed>(bad.at);
    std::throw_with_nested(
        record_failed(bad.at, committed_position(bad.partition), e.what(), bad.partition));
  }

  // The unit's records before `bad`, in a sink transaction of their own. A failure of theirs
  // propagates as it is (the transaction rolled back): no narrower loss is then claimed.
  template <class It>
  [[gnu::cold]] void write_before(It first, It last, record_ref bad) {
    It end = first;
    while (end != last && !(ref_of(*end) == bad))
      ++end;
    if (end == first)
      return;
    sink_->begin();
    tx_open_ = true;
    try {
      for (It it = first; it != end; ++it)
        apply_one(*sink_, partition_of(*it), offset_of(*it), event_of(*it));
      sink_->commit();
      tx_open_ = false;
    } catch (...) {
      tx_open_ = false;
      roll_back_after_failure();
      throw;
    }
  }

  template <class It, std::size_t... I>
  COMMIT_ORDER_INLINE void run_unit(It first, It last, position unit_end, std::size_t unit_index,
                                    std::index_sequence<I...>) {
    fault(fault_point::kind::after_step, step_kind::poll, 0, 0, unit_end, unit_index);
    if constexpr (tx_unit) {
      try {
        (run_step<steps::kinds[I + 1], I + 1>(first, last, unit_end, unit_index), ...);
      } catch (...) {
        // No half-applied unit survives: whatever the transaction wrote goes with it (as the
        // database itself would discard it when a process dies).
        if (tx_open_) {
          tx_open_ = false;
          roll_back_after_failure();
        }
        throw;
      }
    } else {
      (run_step<steps::kinds[I + 1], I + 1>(first, last, unit_end, unit_index), ...);
    }
  }

  // The unit's positions, to the store: per partition in one request where the store takes
  // them so (batch_position_store), so a unit is never committed in one partition only.
  template <class It>
  COMMIT_ORDER_INLINE void commit_unit(It first, It last, position unit_end) {
    if constexpr (partitioned) {
      (void)unit_end;
      if constexpr (batch_position_store<Store>) {
        (void)first;
        (void)last;
        store_->commit(std::span<const start_at>(unit_ends_));
        for (const start_at& s : unit_ends_)
          entry(s.partition).committed = s.at;
      } else {
        for (const start_at& s : unit_ends_) {
          if constexpr (checks_store_start) {
            // With the fingerprint of the record the position follows, when the records at hand
            // hold it (a failed unit's prefix may stop a partition at its first record).
            if (const auto f = fingerprint_before(first, last, s.partition, s.at))
              store_->commit(s.partition, s.at, *f);
            else
              store_commit<partitioned>(*store_, s.partition, s.at);
          } else {
            (void)first;
            (void)last;
            store_commit<partitioned>(*store_, s.partition, s.at);
          }
          entry(s.partition).committed = s.at;
        }
      }
    } else if constexpr (checks_offsets) {
      (void)first;
      store_->commit(unit_end, source_->fingerprint(*(last - 1)));
      committed_ = unit_end;
    } else if constexpr (checks_store_start) {
      (void)first;
      store_->commit(partition_id{0}, unit_end, source_->fingerprint(*(last - 1)));
      committed_ = unit_end;
    } else {
      (void)first;
      (void)last;
      store_commit<partitioned>(*store_, partition_id{0}, unit_end);
      committed_ = unit_end;
    }
  }

  // The fingerprint of the record of partition `k` just before position `p`, if [first, last)
  // holds it.
  template <class It>
  std::optional<std::uint64_t> fingerprint_before(It first, It last, partition_id k, position p) {
    for (It it = last; it != first; --it) {
      const auto& r = *(it - 1);
      if (partition_of(r) == k && position::after(offset_of(r)) == p)
        return source_->fingerprint(r);
    }
    return std::nullopt;
  }

  template <step_kind Step, std::size_t Index, class It>
  COMMIT_ORDER_INLINE void run_step(It first, It last, position unit_end, std::size_t unit_index) {
    if constexpr (Step == step_kind::write && async) {
      for (It it = first; it != last; ++it)
        hand_out(partition_of(*it), offset_of(*it), event_of(*it));
    } else if constexpr (Step == step_kind::write) {
      if constexpr (implicit_tx) {
        sink_->begin();
        tx_open_ = true;
      }
      write_rows<Step, Index>(first, last, unit_end, unit_index);
      if constexpr (implicit_tx) {
        sink_->commit();
        tx_open_ = false;
      }
    } else if constexpr (Step == step_kind::commit_position && tracked_commit) {
      // Out-of-order completion: cover what has completed, never what is still running.
      settle_failures();
      commit_all_completed();
    } else if constexpr (Step == step_kind::commit_position) {
      if constexpr (interruptible) {
        try {
          commit_unit(first, last, unit_end);
        } catch (const std::exception& e) {
          if (dynamic_cast<const commit_interrupted*>(&e) == nullptr)
            throw;
          // Nothing of the unit was committed. Written first (AtLeastOnce), its rows stay;
          // committed first (AtMostOnce), it is not written: either way it is read again.
          ++refused_commits_;
          throw unit_abandoned{};
        }
      } else {
        commit_unit(first, last, unit_end);
      }
      notify_unit_committed(unit_end);
    } else if constexpr (Step == step_kind::begin) {
      sink_->begin();
      tx_open_ = true;
    } else if constexpr (Step == step_kind::store_position) {
      if constexpr (partitioned) {
        for (const start_at& s : unit_ends_) {
          if constexpr (checks_start_record) {
            // A unit holds the record before each of its positions.
            if (const auto f = fingerprint_before(first, last, s.partition, s.at))
              sink_->store_position(s.partition, s.at, owner_of(s.partition), *f);
            else
              sink_store<partitioned>(*sink_, s.partition, s.at, owner_of(s.partition));
          } else if constexpr (fencing) {
            // The epoch this consumer claimed the partition at: a cooperative rebalance keeps
            // it on a partition retained across generations.
            sink_store<partitioned>(*sink_, s.partition, s.at, owner_of(s.partition));
          } else {
            sink_store<partitioned>(*sink_, s.partition, s.at);
          }
        }
      } else if constexpr (sink_fingerprints) {
        sink_->store_position(partition_id{0}, unit_end, *owner_,
                              source_->fingerprint(*(last - 1)));
      } else if constexpr (fencing) {
        sink_store<partitioned>(*sink_, partition_id{0}, unit_end, *owner_);
      } else {
        sink_store<partitioned>(*sink_, partition_id{0}, unit_end);
      }
    } else if constexpr (Step == step_kind::commit) {
      sink_->commit();
      tx_open_ = false;
      if constexpr (facts.position_in_sink) {
        if constexpr (partitioned) {
          for (const start_at& s : unit_ends_)
            entry(s.partition).committed = s.at;
        } else {
          committed_ = unit_end;
        }
        notify_unit_committed(unit_end);
      }
    }
    // TimedCommitPosition is not run in order: the timer is consulted at every boundary.
    tick();
    fault(fault_point::kind::after_step, Step, Index, 0, unit_end, unit_index);
  }

  epoch owner_of(partition_id k) const {
    const partition_entry* e = find(k);
    // A partition this consumer no longer owns (lost in the middle of a unit) has no epoch: the
    // sink refuses epoch -1 like any stale one, and the unit rolls back.
    return e != nullptr && e->owner ? *e->owner : epoch{-1};
  }

  // The rows of one unit, on the pipeline's thread.
  template <step_kind Step, std::size_t Index, class It>
  COMMIT_ORDER_INLINE void write_rows(It first, It last, position unit_end,
                                      std::size_t unit_index) {
    if constexpr (per_record_handling) {
      std::size_t row = 0;
      for (It it = first; it != last; ++it) {
        write_handled(ref_of(*it), event_of(*it));
        if constexpr (auto_commit)
          tick();
        fault(fault_point::kind::after_row, Step, Index, ++row, unit_end, unit_index);
      }
    } else if constexpr (rows_apart) {
      // A unit of one row is written in place (a call would cost a batch of one more than the
      // loop saves); a longer one by write_rows_apart, which leaves a trace of the row it is at.
      It at = first;
      try {
        if (first + 1 == last) {
          write_row(*sink_, first);
        } else {
          write_rows_apart(*sink_, first, last, at);
        }
      } catch (const infrastructure_error&) {
        throw;  // the world's failure, not the record's: no handling blames the record
      } catch (const std::bad_alloc&) {
        throw;  // the process ran out of memory: the world's, whatever the record
      } catch (const std::exception&) {
        failed_ = ref_of(*at);
        throw;
      }
    } else {
      // One handler for the whole loop: it reads the failing record from `it`, so the loop
      // itself carries nothing extra for the failure path.
      // The sink is held in a local: through the member pointer, every write could (for all
      // the compiler knows) have changed it, and each record would reload it.
      Sink& sink = *sink_;
      It it = first;
      try {
        std::size_t row = 0;
        // A unit is never empty (a poll of n > 0 records, or a split of at least one), so the
        // end is tested after each row only: a test before the first would be a comparison the
        // compiler cannot prove false, and one more use of `first` on the hot path.
        do {
          if constexpr (traits::unit_dead_letters) {
            if (is_skipped(ref_of(*it)))
              continue;
          }
          apply_one(sink, partition_of(*it), offset_of(*it), event_of(*it));
          if constexpr (row_timer) {
            // A real auto-commit timer fires whenever it likes, mid-write included; a
            // failing timer commit is not the record's failure, so it leaves this handler.
            timer_exception_ = nullptr;
            try {
              tick();
            } catch (...) {
              timer_exception_ = std::current_exception();
            }
            if (timer_exception_)
              break;
          }
          if constexpr (faults_enabled) {
            fault(fault_point::kind::after_row, Step, Index, ++row, unit_end, unit_index);
          }
        } while (++it != last);
      } catch (const infrastructure_error&) {
        throw;  // the world's failure, not the record's: no handling blames the record
      } catch (const std::bad_alloc&) {
        throw;  // the process ran out of memory: the world's, whatever the record
      } catch (const std::exception&) {
        failed_ = ref_of(*it);
        throw;
      }
      if constexpr (row_timer) {
        if (timer_exception_)
          std::rethrow_exception(std::exchange(timer_exception_, nullptr));
      }
    }
  }

  /// A unit's rows are written by write_rows_apart, a function of their own: where nothing but
  /// the sink runs per row (no observer of rows, no timer or fault point after a row; retries and
  /// dead letters take write_handled first) and the unit is not a transaction (its dead letters
  /// are skipped per row), by every compiler but clang. Measured with
  /// g++ 12 and clang++ 14 (bench/overhead.cpp; docs/performance.md, "The write loop"):
  /// - g++ 12 inlining the sink's write into the poll's own loop keeps the pipeline's address
  ///   alive across it (for the failure path and what follows the write step) beside the sink's,
  ///   and runs out of registers: the end and the record's offset spilled on every row
  ///   (AtMostOnce into the append table, each loop in a translation unit of its own: 67.74
  ///   instructions per record at batch 512 against the twin's 60.76; apart: 61.78).
  /// - clang++ 14 allocates that loop well and inlines the sink's write into it, but not into a
  ///   function of its own (the same case, every loop in one translation unit: 52.29 in the
  ///   poll, 97.27 apart).
  /// - A transactional unit's sink (begin, rollback) is larger: written in two places, once in
  ///   place and once apart, g++ stops inlining it and calls it per row.
  static constexpr bool rows_apart = !compiled_by_clang && !tx_unit && !row_timer &&
                                     !faults_enabled &&
                                     !observes<observer_type, events::row_written, offset> &&
                                     !observes<observer_type, events::replay_absorbed, offset>;

  template <class It>
  COMMIT_ORDER_INLINE static void write_row(Sink& sink, It it) {
    sink_apply<partitioned>(sink, partition_of(*it), offset_of(*it), Transform{}(event_of(*it)));
  }

  // The rows of a unit of more than one, where nothing but the sink runs per row (rows_apart): a
  // static function, so its loop holds the sink, the record, the end and the trace's address, not
  // the pipeline. What it calls is folded into it where the compiler can (flatten: not what is
  // marked noinline, such as a table's growth), the sink's write included. It leaves no handler
  // (one in this loop changes how g++ 12 builds the row: +4 instructions per row), only a trace
  // of the row it is at, which write_rows reads when the sink throws: one store per row.
  template <class It>
  [[gnu::noinline, gnu::flatten]] static void write_rows_apart(Sink& sink, It it, const It last,
                                                               It& at) {
    do {
      at = it;
      write_row(sink, it);
    } while (++it != last);
  }

  // Called inside the handler of the unit's failure. A rollback that fails is the sink's
  // failure, never the record's: the record is not blamed (failed_ cleared), and the original
  // failure travels nested inside `rollback_failed`.
  void roll_back_after_failure() {
    const std::exception_ptr original = std::current_exception();
    try {
      sink_->rollback();
    } catch (...) {
      failed_.reset();
      const std::string why = describe(std::current_exception());
      try {
        std::rethrow_exception(original);
      } catch (...) {
        std::throw_with_nested(rollback_failed(why));
      }
    }
  }

  // ---- writes handed to an executor (detail/async_path.hpp) ---------------------------------

  friend class async_path<Config>;

  void wait_idle() { async_.wait_idle(); }
  template <class E>
  void hand_out(partition_id k, offset o, const E& event) {
    async_.hand_out(sink_, settings_.max_in_flight, settings_.world_backoff, k, o, event);
  }
  void commit_all_completed() { async_.commit_all_completed(*this); }
  void settle_failures() { async_.settle_failures(*this); }
  void finish_in_flight() { async_.finish_in_flight(*this); }

  static std::string describe(const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return x.what();
    } catch (...) {
      return "a non-standard exception";
    }
  }

  // ---- construction ---------------------------------------------------------------------------

  // Settings that would make the loop hang or silently ignore what was asked are refused.
  static void validate(const settings& s) {
    if (s.batch_size == 0)
      throw std::invalid_argument("commit_order: settings.batch_size must be at least 1");
    if constexpr (traits::world_retries > 0) {
      if (s.world_backoff.first.count() < 0 || s.world_backoff.longest < s.world_backoff.first)
        throw std::invalid_argument(
            "commit_order: settings.world_backoff needs 0 <= first <= longest");
    }
    if constexpr (async) {
      if (s.max_in_flight == 0)
        throw std::invalid_argument("commit_order: settings.max_in_flight must be at least 1");
    }
    if constexpr (!fencing) {
      if (s.owner_epoch) {
        throw std::invalid_argument(
            "commit_order: settings.owner_epoch is set but this pipeline cannot fence: the sink "
            "must model fencing_sink and the policy keep its position in the sink");
      }
    }
    if constexpr (group) {
      if (s.owner_epoch) {
        throw std::invalid_argument(
            "commit_order: settings.owner_epoch is set but a group-managed source's epochs come "
            "from its group generation (and the stream's era): leave it unset");
      }
    }
  }

  template <class S, class K, class... Extras>
  void bind_all(S&& source, K&& sink, Extras&&... extras) {
    if constexpr (std::is_same_v<S, Source&>)
      source_ = &source;
    if constexpr (std::is_same_v<K, Sink&>)
      sink_ = &sink;
    (bind(std::forward<Extras>(extras)), ...);
  }
  void bind_all() {}
  template <class S>
  void bind_all(S&&) {}

  // Tells a bound_store what its positions vouch for: the sink's table (table_bound_sink) and
  // the source's identity (identified_source), each empty when not named.
  void bind_store() {
    if constexpr (bound_store<Store>) {
      std::string table, identity, database;
      if constexpr (table_bound_sink<Sink>)
        table = sink_->bound_table();
      if constexpr (identified_source<Source>)
        identity = source_->identity();
      if constexpr (database_bound_sink<Sink>)
        database = sink_->bound_database();
      if constexpr (requires { store_->bind_to(table, identity, database); })
        store_->bind_to(table, identity, database);
      else
        store_->bind_to(table, identity);
    }
  }

  template <class X>
  void bind(X&& x) {
    using T = std::remove_cvref_t<X>;
    if constexpr (std::is_same_v<T, settings>) {
      settings_ = x;
    } else if constexpr (has_store && std::is_same_v<X, Store&>) {
      store_ = &x;
    } else if constexpr (has_dead_letters && std::is_same_v<X, DeadLetters&>) {
      dead_letters_ = &x;
    } else if constexpr (async && std::is_same_v<X, Executor&>) {
      async_.bind(x);
    }
  }

  // Non-transactional retry and dead-lettering act on the one record, in place.

  template <class E>
  COMMIT_ORDER_INLINE void write_handled(record_ref r, const E& event) {
    std::size_t attempt = 0;
    [[maybe_unused]] std::size_t world_tries = 0;
    for (;;) {
      try {
        apply_one(*sink_, r.partition, r.at, event);
        return;
      } catch (const infrastructure_error& x) {
        // Never retried or dead-lettered as the record's; retry_world tries the write again (it
        // may have landed: R16 asks for a sink that absorbs it), else the unit is redone on
        // recovery.
        if constexpr (traits::world_retries > 0) {
          if (world_may_pass(x) && world_tries < traits::world_retries) {
            wait_for_world(++world_tries);
            continue;
          }
          world_spent_ = true;
        }
        throw;
      } catch (const std::bad_alloc&) {
        throw;  // the process ran out of memory: the world's, whatever the record
      } catch (const std::exception& e) {
        if (attempt < Handling::retries) {
          notify_retry(r.at, ++attempt);
          continue;
        }
        failed_ = r;
        if constexpr (Handling::dead_letters) {
          put_dead_letter(r, event, e.what());
          failed_.reset();
          return;
        }
        throw;
      }
    }
  }

  template <class E>
  COMMIT_ORDER_INLINE void apply_one(Sink& sink, partition_id k, offset o, const E& event) {
    decltype(auto) row = transform_(event);
    if constexpr (std::is_same_v<decltype(sink_apply<partitioned>(sink, k, o, row)),
                                 write_outcome> &&
                  observes<observer_type, events::replay_absorbed, offset>) {
      if (sink_apply<partitioned>(sink, k, o, row) == write_outcome::absorbed) {
        notify<events::replay_absorbed>(o);
        return;
      }
    } else {
      sink_apply<partitioned>(sink, k, o, row);
    }
    notify<events::row_written>(o);
  }

  template <class E>
  void put_dead_letter(record_ref r, const E& event, const char* reason) {
    if constexpr (has_dead_letters) {
      if constexpr (partitioned_dead_letter_sink<DeadLetters, E>)
        dead_letters_->put(r.partition, r.at, event, reason);
      else
        dead_letters_->put(r.at, event, reason);
      notify<events::dead_lettered>(r.at);
    }
  }

  bool is_skipped(record_ref r) const noexcept {
    return !skipped_.empty() && std::find(skipped_.begin(), skipped_.end(), r) != skipped_.end();
  }

  // AutoCommit: whenever the interval has passed, commit the last *polled* position, whether or
  // not its records were written. This is the hazard the type reports as MayLoseAndDuplicate.
  COMMIT_ORDER_INLINE void tick() {
    if constexpr (auto_commit) {
      const time_point now = Clock::now();
      if (now - last_auto_commit_ >= settings_.auto_commit_interval) {
        if constexpr (partitioned) {
          for (partition_entry& e : parts_) {
            if (e.committed < e.read) {
              store_commit<partitioned>(*store_, e.id, e.read);
              e.committed = e.read;
              notify<events::auto_committed>(e.read);
            }
          }
        } else {
          store_commit<partitioned>(*store_, partition_id{0}, read_);
          committed_ = read_;
          notify<events::auto_committed>(read_);
        }
        last_auto_commit_ = now;
      }
    }
  }

  COMMIT_ORDER_INLINE void fault([[maybe_unused]] fault_point::kind where,
                                 [[maybe_unused]] step_kind step,
                                 [[maybe_unused]] std::size_t index,
                                 [[maybe_unused]] std::size_t row,
                                 [[maybe_unused]] position unit_end,
                                 [[maybe_unused]] std::size_t unit_index) {
    if constexpr (faults_enabled) {
      faults_.at(fault_point{where, step, index, row, unit_end, unit_index});
    }
  }

  template <class E, class... A>
  COMMIT_ORDER_INLINE void notify(const A&... args) {
    if constexpr (observes<observer_type, E, A...>)
      observer_.on(E{}, args...);
  }

  COMMIT_ORDER_INLINE void notify_unit_committed(position p) { notify<events::unit_committed>(p); }
  void notify_retry(offset o, std::size_t attempt) { notify<events::retried>(o, attempt); }

  // A failure retry_world may get past by trying again: the world's, and not one that trying
  // again cannot change (a rollback that failed left the sink's state unknown; a key that
  // moved partition is still moved).
  static bool world_may_pass(const std::exception& e) noexcept {
    return dynamic_cast<const infrastructure_error*>(&e) != nullptr &&
           dynamic_cast<const rollback_failed*>(&e) == nullptr &&
           dynamic_cast<const key_moved_partition*>(&e) == nullptr;
  }
  [[gnu::cold, gnu::noinline]] void wait_for_world(std::size_t attempt) {
    const std::chrono::milliseconds wait = settings_.world_backoff.before(attempt);
    notify<events::world_retried>(attempt, wait);
    if (wait.count() > 0)
      std::this_thread::sleep_for(wait);
  }

  Source* source_ = nullptr;
  Sink* sink_ = nullptr;
  /// A write outside a transaction spent its retry_world tries in place.
  [[no_unique_address]] std::conditional_t<traits::world_retries != 0, bool, nothing>
      world_spent_{};
  [[no_unique_address]] std::conditional_t<has_store, Store*, nothing> store_{};
  [[no_unique_address]] std::conditional_t<has_dead_letters, DeadLetters*, nothing> dead_letters_{};
  [[no_unique_address]] std::conditional_t<async, async_path<Config>, nothing> async_{};
  settings settings_{};
  std::size_t configured_limit_ = 0;
  std::size_t split_above_ = 0;  // configured_limit_ if it can split a batch, else 0
  [[no_unique_address]] Transform transform_{};
  [[no_unique_address]] observer_type observer_{};
  [[no_unique_address]] faults_type faults_{};
  [[no_unique_address]] std::conditional_t<auto_commit, time_point, nothing> last_auto_commit_{};
  [[no_unique_address]] std::conditional_t<row_timer, std::exception_ptr, nothing>
      timer_exception_{};
  [[no_unique_address]] std::conditional_t<traits::unit_dead_letters, std::vector<record_ref>,
                                           nothing>
      skipped_{};
  // A single-partition source: its one partition's positions and claimed epoch.
  position read_{};
  position committed_{};
  [[no_unique_address]] std::conditional_t<settles_gaps && !partitioned, moved_gap, nothing> gap_{};
  [[no_unique_address]] std::conditional_t<fencing && !partitioned, std::optional<epoch>, nothing>
      owner_{};
  // A partitioned source: the partitions it owns now, and the positions the unit being
  // processed moves them to.
  [[no_unique_address]] std::conditional_t<partitioned, std::vector<partition_entry>, nothing>
      parts_{};
  [[no_unique_address]] std::conditional_t<partitioned, std::vector<start_at>, nothing>
      unit_ends_{};
  [[no_unique_address]] std::conditional_t<group, listener, nothing> listener_{};
  std::optional<record_ref> failed_{};
  std::size_t unit_size_ = 0;  // the records of the unit being processed (see process_unit)
  [[no_unique_address]] std::conditional_t<faults_enabled, std::size_t, nothing> units_started_{};
  [[no_unique_address]] std::conditional_t<interruptible, std::size_t, nothing> refused_commits_{};
  bool recovered_ = false;
  bool tx_open_ = false;
};

}  // namespace commit_order::detail

#undef COMMIT_ORDER_INLINE
