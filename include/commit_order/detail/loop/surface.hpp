// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/surface.hpp — the loop behind `pipeline`: its surface and `poll_once`
// (private).
//
// The class the public `pipeline` stands on: construction, recovery, one poll, progress; its
// state; and the declarations of the rest, defined by job in the files beside this one:
// partitions.hpp (positions, claims, gaps, assignment changes), unit.hpp (a unit's steps and
// the failure protocol) and writes.hpp (the write loop). docs/architecture.md walks a record
// through them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <iterator>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/concepts.hpp"
#include "commit_order/detail/loop/partition_table.hpp"
#include "commit_order/detail/loop/traits.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/observer.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"
#include "commit_order/progress.hpp"
#include "commit_order/steps.hpp"

// The loop's layers (unit, step, record) must fold into one function, as the hand-written loop
// is one; the inliner's size heuristics would otherwise stop at a layer boundary and the
// per-record cost would show it (bench/overhead.cpp measures exactly this). Used on the
// declarations below; undefined at the end of this file.
#if defined(__GNUC__) || defined(__clang__)
#define COMMIT_ORDER_INLINE inline __attribute__((always_inline))
#else
#define COMMIT_ORDER_INLINE inline
#endif

namespace commit_order::detail {

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
  // The parts as the loop sees them: per partition (loop/parts.hpp).
  using SourcePart = source_part_t<Source>;
  using SinkPart = sink_part<traits::partitioned, Sink>;
  using StorePart = store_part<traits::partitioned, Store>;
  using Event = typename traits::event_type;

  static constexpr step_order_facts facts = traits::facts;
  static constexpr bool has_store = traits::has_store;
  static constexpr bool has_dead_letters = traits::has_dead_letters;
  static constexpr bool async = traits::async;
  static constexpr bool tracked_commit = traits::tracked_commit;
  static constexpr bool auto_commit = traits::auto_commit;
  static constexpr bool implicit_tx = traits::implicit_tx;
  static constexpr bool tx_unit = traits::tx_unit;
  static constexpr bool flushed_writes = traits::flushed_writes;
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

  /// What a failed run of a unit leaves for the failure protocol: the record whose write failed,
  /// when a record's write did, and whether a write spent its retry_world tries in place. The
  /// write loop fills it as the exception passes (it is handed down by reference); process_unit
  /// alone reads it, and empties it as it reads. One member rather than a local of
  /// process_unit, which would be initialised at every unit (docs/performance.md, "The failure
  /// record").
  struct unit_failure {
    std::optional<record_ref> record;
    [[no_unique_address]] std::conditional_t<traits::world_retries != 0, bool, nothing>
        world_spent{};
  };

  /// The last run of offsets holding no record a partition's position moved over.
  struct moved_gap {
    position from;
    position to;
  };

  /// What the loop keeps per partition it owns.
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
    // Dead letters written in a sink's own transaction commit with it (R21 checked their type):
    // bound to another object of the sink's type, they would never be committed.
    if constexpr (has_dead_letters) {
      if constexpr (has_capability_v<DeadLetters, CommitsWithSink>) {
        if (dead_letters_ != nullptr && &dead_letters_->sink() != &sink_.sink())
          throw std::invalid_argument(
              "commit_order: the dead letters are written in the transaction of another sink "
              "than the one this pipeline writes through -- build them on the pipeline's sink");
      }
    }
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
    } else {
      parts_.clear();
      const auto starts = claim_and_check(owned_partitions(), std::nullopt);
      for (const start_at& s : starts)
        source_->seek(s.partition, s.at);
      if (!starts.empty())
        first_start = starts.front().at;
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
      parts_.note_read(first, last);
      const position batch_end = position::after(offset_of(*(last - 1)));
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
    const partition_entry* e = parts_.find(k);
    return e != nullptr ? e->read : position{};
  }
  /// The last position of partition `k` made durable (in the store, or in the sink's
  /// transaction).
  [[nodiscard]] position committed_position(partition_id k = partition_id{0}) const noexcept {
    const partition_entry* e = parts_.find(k);
    return e != nullptr ? e->committed : position{};
  }

  /// Partition `k`'s read and committed positions, the sink's applied watermark for it and the
  /// source's end. A single-partition pipeline answers for its one partition whatever `k` is
  /// (its rows, like its position, are partition 0's in the sink).
  [[nodiscard]] commit_order::progress progress(partition_id k = partition_id{0}) const {
    commit_order::progress p{read_position(k), committed_position(k), std::nullopt, source_->end(k),
                             k};
    if constexpr (SinkPart::has_watermark) {
      p.applied_watermark = sink_->applied_watermark(partitioned ? k : partition_id{0});
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
      if (const partition_entry* e = parts_.find(k))
        g = e->gap;
      if (g.to == p.read && g.from < g.to)
        p.records_end = g.from;
    }
    return p;
  }

  /// The progress of every partition this consumer owns, in ascending partition order.
  [[nodiscard]] std::vector<commit_order::progress> partitions() const {
    std::vector<commit_order::progress> all;
    for (const partition_entry& e : parts_.all())
      all.push_back(progress(e.id));
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
  // The partitions the source assigns this consumer, in ascending order.
  auto owned_partitions() {
    if constexpr (partitioned) {
      std::vector<partition_id> owned;
      for (const auto& k : source_->assignment())
        owned.push_back(partition_id(k));
      std::ranges::sort(owned);
      return owned;
    } else {
      return source_->assignment();
    }
  }

  // ---- partitions (loop/partitions.hpp) -----------------------------------------------------
  // Where each partition starts: loaded or claimed, checked against what the source retains.

  std::vector<start_at> claim_and_check(std::span<const partition_id> owned,
                                        std::optional<std::int32_t> generation);
  position checked_start(partition_id k, std::optional<position> stored,
                         position* earliest_out = nullptr) const;
  void check_not_reused(position stored, std::optional<std::uint64_t> expected);
  void take(const start_at& s, std::optional<epoch> owner);

  // Offsets that will never hold a record.
  void settle_gaps();
  static bool idle(position read, position committed, const moved_gap& last) noexcept;
  void move_over(partition_id k, position& read, position& committed, moved_gap& last,
                 const gap& g);

  // A group-managed source's assignment. The listener is called by the source inside poll: no
  // unit is open then (a batch is processed whole before the next poll), so an orderly revoke
  // only has to make durable what was read and written.
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
                                    std::int32_t generation);
  void on_revoked(std::span<const partition_id> partitions);
  void on_lost(std::span<const partition_id> partitions);
  void forget(partition_id k);

  // What the loop keeps per partition.
  epoch owner_of(partition_id k) const;

  // ---- a unit of work (loop/unit.hpp) --------------------------------------------------------
  // A batch split into units; a unit's steps in the policy's order; the failure protocol.

  static std::size_t configured_limit(const settings& s) noexcept;
  COMMIT_ORDER_INLINE bool may_split(std::size_t n) const;
  std::size_t unit_limit() const;
  template <class It>
  COMMIT_ORDER_INLINE void process_batch(It first, It last, std::size_t n, position batch_end);
  template <class It>
  [[gnu::noinline]] void process_splits(It first, std::size_t n);
  template <class It>
  COMMIT_ORDER_INLINE void process_unit(It first, It last, std::size_t count, position unit_end);
  template <class It, std::size_t... I>
  COMMIT_ORDER_INLINE void run_unit(It first, It last, position unit_end, std::size_t unit_index,
                                    unit_failure& failure, std::index_sequence<I...>);
  template <step_kind Step, std::size_t Index, class It>
  COMMIT_ORDER_INLINE void run_step(It first, It last, position unit_end, std::size_t unit_index,
                                    unit_failure& failure);
  template <class It>
  COMMIT_ORDER_INLINE void commit_unit(It first, It last, position unit_end);
  template <class It, class Ends>
  COMMIT_ORDER_INLINE void commit_positions(It first, It last, const Ends& ends);
  template <class It>
  COMMIT_ORDER_INLINE void commit_position(It first, It last, start_at s);
  template <class It>
  std::optional<std::uint64_t> fingerprint_before(It first, It last, partition_id k, position p);
  COMMIT_ORDER_INLINE void tick();

  // The failure protocol.
  template <class R>
  static record_ref ref_of(const R& r) noexcept {
    return record_ref{partition_of(r), offset_of(r)};
  }
  template <class It>
  static std::optional<record_ref> deferred_failure(It first, It last, const std::exception& e);
  template <class It>
  [[noreturn]] void give_up(It first, It last, record_ref bad, const std::exception& e);
  template <class It>
  [[gnu::cold]] void write_before(It first, It last, record_ref bad);
  void roll_back_after_failure();
  void forget_unflushed() noexcept;
  template <class F>
  void in_transaction_of_its_own(F&& work);
  template <class E>
  void put_dead_letter(record_ref r, const E& event, const char* reason);
  bool is_skipped(record_ref r) const noexcept;
  static bool world_may_pass(const std::exception& e) noexcept;
  [[gnu::cold, gnu::noinline]] void wait_for_world(std::size_t attempt);
  static std::string describe(const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      return x.what();
    } catch (...) {
      return "a non-standard exception";
    }
  }

  // What the loop tells the observer and the fault points.
  COMMIT_ORDER_INLINE void fault([[maybe_unused]] fault_point::kind where,
                                 [[maybe_unused]] step_kind step,
                                 [[maybe_unused]] std::size_t index,
                                 [[maybe_unused]] std::size_t row,
                                 [[maybe_unused]] position unit_end,
                                 [[maybe_unused]] std::size_t unit_index);
  template <class E, class... A>
  COMMIT_ORDER_INLINE void notify(const A&... args) {
    if constexpr (observes<observer_type, E, A...>)
      observer_.on(E{}, args...);
  }
  COMMIT_ORDER_INLINE void notify_unit_committed(position p) { notify<events::unit_committed>(p); }
  void notify_retry(offset o, std::size_t attempt) { notify<events::retried>(o, attempt); }

  // ---- the write loop (loop/writes.hpp) ------------------------------------------------------
  // A unit's rows on the pipeline's thread. Where rows_apart_v<Config> holds, a unit of more
  // than one row is written by write_rows_apart, a function of its own.

  template <step_kind Step, std::size_t Index, class It>
  COMMIT_ORDER_INLINE void write_rows(It first, It last, position unit_end, std::size_t unit_index,
                                      unit_failure& failure);
  template <class It>
  COMMIT_ORDER_INLINE static void write_row(Sink& sink, It it);
  template <class It>
  [[gnu::noinline, gnu::flatten]] static void write_rows_apart(Sink& sink, It it, const It last,
                                                               It& at);
  // Non-transactional retry and dead-lettering act on the one record, in place.
  template <class E>
  COMMIT_ORDER_INLINE void write_handled(record_ref r, const E& event, unit_failure& failure);
  template <class E>
  COMMIT_ORDER_INLINE void apply_one(Sink& sink, partition_id k, offset o, const E& event);

  // ---- writes handed to an executor (detail/async_path.hpp) ---------------------------------

  friend class async_path<Config>;

  void wait_idle() { async_.wait_idle(); }
  // Under the pipeline's partition: a single-partition source's records are all partition
  // 0's, whatever partition their type names.
  template <class R>
  void hand_out(const R& r) {
    async_.hand_out(&sink_.sink(), settings_.max_in_flight, settings_.world_backoff,
                    partitioned ? partition_of(r) : partition_id{0}, offset_of(r), event_of(r));
  }
  void commit_all_completed() { async_.commit_all_completed(*this); }
  void settle_failures() { async_.settle_failures(*this); }
  void finish_in_flight() { async_.finish_in_flight(*this); }

  // ---- construction (below, in this file) ---------------------------------------------------

  static void validate(const settings& s);
  template <class S, class K, class... Extras>
  void bind_all(S&& source, K&& sink, Extras&&... extras);
  void bind_all() {}
  template <class S>
  void bind_all(S&&) {}
  void bind_store();
  template <class X>
  void bind(X&& x);

  // ---- state -------------------------------------------------------------------------------

  SourcePart source_{};
  SinkPart sink_{};
  [[no_unique_address]] std::conditional_t<has_store, StorePart, nothing> store_{};
  [[no_unique_address]] std::conditional_t<has_dead_letters, DeadLetters*, nothing> dead_letters_{};
  [[no_unique_address]] std::conditional_t<async, async_path<Config>, nothing> async_{};
  settings settings_{};
  std::size_t configured_limit_ = 0;
  std::size_t split_above_ = 0;  // configured_limit_ if it can split a batch, else 0
  [[no_unique_address]] Transform transform_{};
  [[no_unique_address]] observer_type observer_{};
  [[no_unique_address]] faults_type faults_{};
  [[no_unique_address]] std::conditional_t<auto_commit, time_point, nothing> last_auto_commit_{};
  [[no_unique_address]] std::conditional_t<traits::unit_dead_letters, std::vector<record_ref>,
                                           nothing>
      skipped_{};
  // The partitions this consumer owns (one, 0, always, for a single-partition source) and the
  // positions the unit being run moves them to (loop/partition_table.hpp).
  partition_table<partition_entry, !partitioned> parts_{};
  [[no_unique_address]] std::conditional_t<group, listener, nothing> listener_{};
  std::size_t unit_size_ = 0;  // the records of the unit being processed (see process_unit)
  [[no_unique_address]] std::conditional_t<faults_enabled, std::size_t, nothing> units_started_{};
  [[no_unique_address]] std::conditional_t<interruptible, std::size_t, nothing> refused_commits_{};
  unit_failure failure_{};  // see unit_failure
  bool recovered_ = false;
  bool tx_open_ = false;
};

// ---- construction: the parts and the settings a pipeline is made of ---------------------------

// Settings that would make the loop hang or silently ignore what was asked are refused.
template <class Config>
inline void pipeline_impl<Config>::validate(const settings& s) {
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
  if (s.owner_epoch && s.owner_epoch->value() <= 0) {
    // Epoch 0 is the epoch of no owner (a position store's rows, a sink used without claims):
    // an owner claiming it would be fenced by nothing, and fence nothing.
    throw std::invalid_argument(
        "commit_order: settings.owner_epoch must be above 0: epoch 0 is no owner's, so a "
        "consumer claiming it would neither fence nor be fenced -- give each owner a higher "
        "epoch than the last, or leave it unset for a fresh one");
  }
  if constexpr (group) {
    if (s.owner_epoch) {
      throw std::invalid_argument(
          "commit_order: settings.owner_epoch is set but a group-managed source's epochs come "
          "from its group generation (and the stream's era): leave it unset");
    }
  }
}

template <class Config>
template <class S, class K, class... Extras>
inline void pipeline_impl<Config>::bind_all(S&& source, K&& sink, Extras&&... extras) {
  if constexpr (std::is_same_v<S, Source&>)
    source_ = SourcePart(source);
  if constexpr (std::is_same_v<K, Sink&>)
    sink_ = SinkPart(sink);
  (bind(std::forward<Extras>(extras)), ...);
}

// Tells a bound_store what its positions vouch for: the sink's table (table_bound_sink) and
// the source's identity (identified_source), each empty when not named.
template <class Config>
inline void pipeline_impl<Config>::bind_store() {
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

template <class Config>
template <class X>
inline void pipeline_impl<Config>::bind(X&& x) {
  using T = std::remove_cvref_t<X>;
  if constexpr (std::is_same_v<T, settings>) {
    settings_ = x;
  } else if constexpr (has_store && std::is_same_v<X, Store&>) {
    store_ = StorePart(x);
  } else if constexpr (has_dead_letters && std::is_same_v<X, DeadLetters&>) {
    dead_letters_ = &x;
  } else if constexpr (async && std::is_same_v<X, Executor&>) {
    async_.bind(x);
  }
}

}  // namespace commit_order::detail

#undef COMMIT_ORDER_INLINE
