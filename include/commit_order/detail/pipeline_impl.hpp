// commit_order/detail/pipeline_impl.hpp — the loop behind `pipeline` (private).
#pragma once

#include <chrono>
#include <cstddef>
#include <iterator>
#include <optional>
#include <ranges>
#include <type_traits>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/record.hpp"
#include "commit_order/steps.hpp"

namespace commit_order::detail {

/// An empty member for state a configuration does not need.
struct nothing final {};

/// Stands in for the loop of an illegal pipeline, so the rule's static_assert is the only
/// error: it accepts any constructor arguments and offers the public members.
struct rejected_pipeline {
  template <class... Args>
  explicit rejected_pipeline(Args&&...) {}
  position recover() { return position{}; }
  std::size_t poll_once() { return 0; }
  std::size_t run() { return 0; }
  [[nodiscard]] position read_position() const { return position{}; }
  [[nodiscard]] position committed_position() const { return position{}; }
};

template <class Source, class Sink, class Policy, class Store, class Clock>
class pipeline_impl {
 public:
  using source_type = Source;
  using sink_type = Sink;
  using policy_type = Policy;
  using store_type = Store;
  using steps = effective_steps_t<Policy>;
  using guarantee = guarantee_t<Policy>;

 private:
  static constexpr step_order_facts facts = facts_of_v<steps>;
  static constexpr bool has_store = !std::is_same_v<Store, no_position_store>;
  static constexpr bool auto_commit = facts.position_on_timer;
  static constexpr std::size_t static_max_rows = max_transaction_rows_v<Sink>;
  using store_ptr = std::conditional_t<has_store, Store*, nothing>;
  using time_point = typename Clock::time_point;

 public:
  explicit pipeline_impl(Source& source, Sink& sink, settings s = {}) requires(!has_store)
      : source_(&source), sink_(&sink), settings_(s) {}

  pipeline_impl(Source& source, Sink& sink, Store& store, settings s = {}) requires has_store
      : source_(&source),
        sink_(&sink),
        store_(&store),
        settings_(s) {}

  /// Loads the stored position — from the sink under TransactionalPosition, from the store
  /// otherwise — checks it against what the source retains, and seeks there. A consumer with
  /// no stored position starts at the earliest retained record.
  position recover() {
    std::optional<position> stored;
    if constexpr (facts.position_in_sink) {
      stored = sink_->load_position();
    } else {
      stored = store_->load();
    }
    const position start = stored.value_or(source_->earliest());
    if (start < source_->earliest())
      throw position_lost(start, source_->earliest());
    if (start > source_->end())
      throw position_beyond_end(start, source_->end());
    source_->seek(start);
    read_ = committed_ = start;
    if constexpr (auto_commit)
      last_auto_commit_ = Clock::now();
    recovered_ = true;
    return start;
  }

  /// One Poll and the rest of the policy's steps over each unit of work in the batch.
  /// Returns the number of records handled (0 when the source had nothing new).
  std::size_t poll_once() {
    if (!recovered_)
      recover();
    auto&& batch = source_->poll(settings_.batch_size);
    const auto n = static_cast<std::size_t>(std::ranges::size(batch));
    if (n == 0)
      return 0;
    auto first = std::ranges::begin(batch);
    read_ = position::after(offset_of(*(first + static_cast<std::ptrdiff_t>(n - 1))));
    tick();
    const std::size_t unit = unit_size(n);
    for (std::size_t done = 0; done < n;) {
      const std::size_t len = std::min(unit, n - done);
      auto unit_first = first + static_cast<std::ptrdiff_t>(done);
      run_unit(unit_first, unit_first + static_cast<std::ptrdiff_t>(len), steps{});
      done += len;
    }
    return n;
  }

  /// Polls until the source has nothing more to give; returns the records handled.
  std::size_t run() {
    std::size_t total = 0;
    while (const std::size_t n = poll_once())
      total += n;
    return total;
  }

  /// Where the next poll reads.
  [[nodiscard]] position read_position() const noexcept { return read_; }
  /// The last position made durable (in the store, or in the sink's transaction).
  [[nodiscard]] position committed_position() const noexcept { return committed_; }

 private:
  std::size_t unit_size(std::size_t batch) const noexcept {
    if constexpr (std::is_same_v<typename Policy::trigger, EveryRecord>) {
      return 1;
    } else if constexpr (static_max_rows != 0) {
      return std::min(batch, static_max_rows);
    } else {
      return batch;
    }
  }

  // The steps after Poll run once per unit, in the policy's order.
  template <class It, class... Rest>
  void run_unit(It first, It last, step_list<Poll, Rest...>) {
    const position unit_end = position::after(offset_of(*(last - 1)));
    if constexpr (facts.uses_transaction) {
      try {
        (run_step(Rest{}, first, last, unit_end), ...);
      } catch (...) {
        // No half-applied unit survives: whatever the transaction wrote goes with it.
        if (tx_open_) {
          tx_open_ = false;
          sink_->rollback();
        }
        throw;
      }
    } else {
      (run_step(Rest{}, first, last, unit_end), ...);
    }
  }

  template <class Step, class It>
  void run_step(Step, It first, It last, position unit_end) {
    if constexpr (std::is_same_v<Step, Write>) {
      for (; first != last; ++first) {
        sink_->apply(offset_of(*first), event_of(*first));
      }
    } else if constexpr (std::is_same_v<Step, CommitPosition>) {
      store_->commit(unit_end);
      committed_ = unit_end;
    } else if constexpr (std::is_same_v<Step, Begin>) {
      sink_->begin();
      tx_open_ = true;
    } else if constexpr (std::is_same_v<Step, StorePosition>) {
      sink_->store_position(unit_end);
      staged_ = unit_end;
    } else if constexpr (std::is_same_v<Step, Commit>) {
      sink_->commit();
      tx_open_ = false;
      if constexpr (facts.position_in_sink)
        committed_ = staged_;
    } else if constexpr (std::is_same_v<Step, TimedCommitPosition>) {
      // Not an ordered step: the timer is consulted at every step boundary below.
    }
    tick();
  }

  // AutoCommit: whenever the interval has passed, commit the last *polled* position, whether
  // or not its records were written. This is the hazard the type reports as MayLoseAndDuplicate.
  void tick() {
    if constexpr (auto_commit) {
      const time_point now = Clock::now();
      if (now - last_auto_commit_ >= settings_.auto_commit_interval) {
        store_->commit(read_);
        committed_ = read_;
        last_auto_commit_ = now;
      }
    }
  }

  Source* source_;
  Sink* sink_;
  [[no_unique_address]] store_ptr store_{};
  settings settings_;
  position read_{};
  position committed_{};
  position staged_{};
  [[no_unique_address]] std::conditional_t<auto_commit, time_point, nothing> last_auto_commit_{};
  bool recovered_ = false;
  bool tx_open_ = false;
};

}  // namespace commit_order::detail
