// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/unit.hpp — a unit of work: its steps, the failure protocol (private).
//
// A polled batch becomes units (split by a transaction-size limit); a unit runs the policy's
// steps in order (run_step); a failure is classified as the record's or the world's, retried,
// dead-lettered or reported, and never committed past (process_unit, give_up).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "commit_order/detail/loop/surface.hpp"

namespace commit_order::detail {

// The largest unit the static limit and the settings allow, computed once (no limit: max).
template <class Config>
inline std::size_t pipeline_impl<Config>::configured_limit(const settings& s) noexcept {
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
template <class Config>
inline bool pipeline_impl<Config>::may_split(std::size_t n) const {
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
template <class Config>
template <class It>
inline void pipeline_impl<Config>::process_batch(It first, It last, std::size_t n,
                                                 position batch_end) {
  if (may_split(n)) [[unlikely]] {
    process_splits(first, n);
  } else {
    process_unit(first, last, n, batch_end);
  }
}

// A batch a limit may split, in units of the largest size allowed (one unit when none is
// exceeded). Out of line: its loop would otherwise hold registers across the common path.
template <class Config>
template <class It>
void pipeline_impl<Config>::process_splits(It first, std::size_t n) {
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
template <class Config>
inline std::size_t pipeline_impl<Config>::unit_limit() const {
  if constexpr (std::is_same_v<typename Policy::trigger, EveryRecord>) {
    return 1;
  } else if constexpr (runtime_limited_sink<Sink>) {
    const std::size_t n = sink_->max_transaction_rows();
    return n != 0 && n < configured_limit_ ? n : configured_limit_;
  } else {
    return configured_limit_;
  }
}

template <class Config>
template <class It>
inline void pipeline_impl<Config>::process_unit(It first, It last, std::size_t count,
                                                position unit_end) {
  parts_.mark_unit(first, last);
  // Only fault points need to number units; otherwise the counter does not exist.
  std::size_t unit_index = 0;
  if constexpr (faults_enabled)
    unit_index = units_started_++;
  // Each failed record gets its own retries, however many re-runs of the unit it takes.
  // Only a transactional unit that retries needs the count; elsewhere it does not exist.
  static constexpr bool unit_retries = traits::unit_retries;
  [[maybe_unused]] std::conditional_t<unit_retries, std::vector<std::pair<record_ref, std::size_t>>,
                                      nothing>
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
  // Empty here: the failure protocol below empties it whenever it reads it.
  unit_failure& failure = failure_;
  for (;;) {
    try {
      run_unit(first, last, unit_end, unit_index, failure,
               std::make_index_sequence<steps::size - 1>{});
      return;
    } catch (const std::exception& e) {
      if constexpr (first_from_count)
        first = last - static_cast<std::ptrdiff_t>(unit_size_);
      if constexpr (traits::world_retries > 0) {
        // The world's failure, not a record's: the unit (rolled back, if it is a transaction)
        // is run again after a wait, its position held. A write outside a transaction was
        // tried again in place already, and is not tried again here.
        const bool in_place = std::exchange(failure.world_spent, false);
        if (!failure.record && !in_place && world_may_pass(e) &&
            world_tries < traits::world_retries) {
          forget_unflushed();
          wait_for_world(++world_tries);
          continue;
        }
      }
      // Only a record's failure is handled here; a failing begin, commit or position store is
      // not the record's fault and propagates as it is (after the rollback in run_unit) --
      // unless the sink names the record whose row failed there (row_failed: a sink that
      // sends a unit's rows together learns of a row's failure only then). A rollback that
      // failed is the sink's failure, never the record's, whatever failed before it.
      if (dynamic_cast<const rollback_failed*>(&e) != nullptr)
        failure.record.reset();
      if (!failure.record)
        failure.record = deferred_failure(first, last, e);
      if (!failure.record) {
        forget_unflushed();
        throw;
      }
      const record_ref bad = *std::exchange(failure.record, std::nullopt);
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

// The record a sink's row_failed names, if it is one of this unit's: a name outside the unit
// is not this unit's to retry or dead-letter, and propagates as it is.
template <class Config>
template <class It>
inline auto pipeline_impl<Config>::deferred_failure(It first, It last, const std::exception& e)
    -> std::optional<record_ref> {
  const auto* deferred = dynamic_cast<const row_failed*>(&e);
  if (deferred == nullptr)
    return std::nullopt;
  const record_ref named{deferred->partition(), deferred->at()};
  // A single-partition source's records are all partition 0's, whatever partition their type
  // names, and a sink handed apply(o, row) names its row as partition 0's: only the offset
  // tells the record. The record is returned as the unit knows it.
  for (It it = first; it != last; ++it) {
    const record_ref r = ref_of(*it);
    if (r.at == named.at && (!partitioned || r.partition == named.partition))
      return r;
  }
  return std::nullopt;
}

// Called inside the handler of the record's exception, which it nests into record_failed.
template <class Config>
template <class It>
inline void pipeline_impl<Config>::give_up(It first, It last, record_ref bad,
                                           const std::exception& e) {
  if constexpr (prefix_commit) {
    // The records before `bad` are durable: cover them, so a restart resumes at `bad`. Never
    // past it: the partial batch must not be committed over the gap.
    It prefix_end = first;
    while (prefix_end != last && !(ref_of(*prefix_end) == bad))
      ++prefix_end;
    if (prefix_end != first) {
      parts_.mark_unit(first, prefix_end);
      // A partition with no record before the failed one keeps its durable position: what
      // lies between it and the failed record holds no record (offsets a gap or compaction
      // left), and a position moved there would be stored without the fingerprint of the
      // record it follows, which a restart checks.
      std::vector<start_at> covered;
      for (const start_at& s : parts_.unit_ends(position::after(offset_of(*(prefix_end - 1)))))
        if (parts_.entry(s.partition).committed < s.at)
          covered.push_back(s);
      try {
        if constexpr (flushed_writes)
          sink_.sink().flush();  // the prefix's rows were handed over, and are durable only now
        if (!covered.empty())
          commit_positions(first, prefix_end, std::span<const start_at>(covered));
      } catch (const std::exception& x) {
        // The prefix need not be covered: refused while the group rebalances, it is read
        // again and absorbed. The record's failure is what this unit reports.
        if (!interruptible || dynamic_cast<const commit_interrupted*>(&x) == nullptr)
          throw;
        if constexpr (interruptible)
          ++refused_commits_;
      }
    }
  } else if constexpr (tx_unit && facts.may_lose()) {
    // The position went first (AtMostOnce) and the unit's transaction was rolled back with
    // the failed record: the records before it are written again, in a transaction of their
    // own, so only the failed record and what follows it are lost, as the error says.
    write_before(first, last, bad);
  } else if constexpr (flushed_writes) {
    // The position went first (AtMostOnce): the records before `bad` were handed over, and are
    // made durable, so that only the failed record and what follows it are lost, as the error
    // says.
    (void)first;
    (void)last;
    sink_.sink().flush();
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
template <class Config>
template <class It>
inline void pipeline_impl<Config>::write_before(It first, It last, record_ref bad) {
  It end = first;
  while (end != last && !(ref_of(*end) == bad))
    ++end;
  if (end == first)
    return;
  in_transaction_of_its_own([&] {
    for (It it = first; it != end; ++it)
      apply_one(sink_.sink(), partition_of(*it), offset_of(*it), event_of(*it));
  });
}

// Runs `work` in a sink transaction of its own, outside any unit: committed, or rolled back and
// its failure rethrown.
template <class Config>
template <class F>
inline void pipeline_impl<Config>::in_transaction_of_its_own(F&& work) {
  sink_->begin();
  tx_open_ = true;
  try {
    work();
    sink_->commit();
    tx_open_ = false;
  } catch (...) {
    tx_open_ = false;
    roll_back_after_failure();
    throw;
  }
}

template <class Config>
template <class It, std::size_t... I>
inline void pipeline_impl<Config>::run_unit(It first, It last, position unit_end,
                                            std::size_t unit_index, unit_failure& failure,
                                            std::index_sequence<I...>) {
  fault(fault_point::kind::after_step, step_kind::poll, 0, 0, unit_end, unit_index);
  if constexpr (tx_unit) {
    try {
      (run_step<steps::kinds[I + 1], I + 1>(first, last, unit_end, unit_index, failure), ...);
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
    (run_step<steps::kinds[I + 1], I + 1>(first, last, unit_end, unit_index, failure), ...);
  }
}

// The unit's positions, to the store.
template <class Config>
template <class It>
inline void pipeline_impl<Config>::commit_unit(It first, It last, position unit_end) {
  if constexpr (partitioned && batch_position_store<Store>)
    commit_positions(first, last, parts_.unit_ends(unit_end));
  else
    parts_.each_unit_end(unit_end, [&](start_at s) { commit_position(first, last, s); });
}

// Positions of records in [first, last), to the store: per partition in one request where the
// store takes them so (batch_position_store), so a unit is never committed in one partition
// only.
template <class Config>
template <class It, class Ends>
inline void pipeline_impl<Config>::commit_positions(It first, It last, const Ends& ends) {
  if constexpr (partitioned && batch_position_store<Store>) {
    (void)first;
    (void)last;
    store_->commit(std::span<const start_at>(ends));
    for (const start_at& s : ends)
      parts_.entry(s.partition).committed = s.at;
  } else {
    for (const start_at& s : ends)
      commit_position(first, last, s);
  }
}

// One partition's position after a record of [first, last), to the store: with the fingerprint
// of the record it follows where the store keeps one.
template <class Config>
template <class It>
inline void pipeline_impl<Config>::commit_position(It first, It last, start_at s) {
  if constexpr (checks_offsets) {
    // One partition's store that keeps the fingerprint beside its one position.
    (void)first;
    store_->commit_after(s.partition, s.at, source_->fingerprint(*(last - 1)));
  } else if constexpr (checks_store_start) {
    // With the fingerprint of the record the position follows, when the records at hand
    // hold it (a failed unit's prefix may stop a partition at its first record).
    if (const auto f = fingerprint_before(first, last, s.partition, s.at))
      store_->commit_after(s.partition, s.at, *f);
    else
      store_->commit(s.partition, s.at);
  } else {
    (void)first;
    (void)last;
    store_->commit(s.partition, s.at);
  }
  parts_.entry(s.partition).committed = s.at;
}

// The fingerprint of the record of partition `k` just before position `p`, if [first, last)
// holds it. A single-partition source's records are all partition 0's, whatever partition
// their own type names (a Kafka partition_source's records name the topic's partition).
template <class Config>
template <class It>
inline std::optional<std::uint64_t> pipeline_impl<Config>::fingerprint_before(It first, It last,
                                                                              partition_id k,
                                                                              position p) {
  for (It it = last; it != first; --it) {
    const auto& r = *(it - 1);
    if ((!partitioned || partition_of(r) == k) && position::after(offset_of(r)) == p)
      return source_->fingerprint(r);
  }
  return std::nullopt;
}

template <class Config>
template <step_kind Step, std::size_t Index, class It>
inline void pipeline_impl<Config>::run_step(It first, It last, position unit_end,
                                            std::size_t unit_index,
                                            [[maybe_unused]] unit_failure& failure) {
  if constexpr (Step == step_kind::write && async) {
    for (It it = first; it != last; ++it)
      hand_out(*it);
  } else if constexpr (Step == step_kind::write) {
    if constexpr (implicit_tx) {
      sink_->begin();
      tx_open_ = true;
    }
    write_rows<Step, Index>(first, last, unit_end, unit_index, failure);
    if constexpr (flushed_writes)
      sink_.sink().flush();  // the rows are durable: the position may pass them
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
    for (const start_at& s : parts_.unit_ends(unit_end)) {
      if constexpr (sink_fingerprints) {
        // A unit holds the record before each of its positions.
        if (const auto f = fingerprint_before(first, last, s.partition, s.at))
          sink_->store_position(s.partition, s.at, owner_of(s.partition), *f);
        else
          sink_->store_position(s.partition, s.at, owner_of(s.partition));
      } else if constexpr (fencing) {
        // The epoch this consumer claimed the partition at: a cooperative rebalance keeps
        // it on a partition retained across generations.
        sink_->store_position(s.partition, s.at, owner_of(s.partition));
      } else {
        sink_->store_position(s.partition, s.at);
      }
    }
  } else if constexpr (Step == step_kind::commit) {
    sink_->commit();
    tx_open_ = false;
    if constexpr (facts.position_in_sink) {
      for (const start_at& s : parts_.unit_ends(unit_end))
        parts_.entry(s.partition).committed = s.at;
      notify_unit_committed(unit_end);
    }
  }
  // TimedCommitPosition is not run in order: the timer is consulted at every boundary.
  tick();
  fault(fault_point::kind::after_step, Step, Index, 0, unit_end, unit_index);
}

// A unit the world failed before its flush: what the sink was handed is flushed and forgotten,
// whatever the flush says (the unit is not committed: it is read again), so that none of it is
// counted as a later unit's.
template <class Config>
inline void pipeline_impl<Config>::forget_unflushed() noexcept {
  if constexpr (flushed_writes) {
    try {
      sink_.sink().flush();
    } catch (...) {
      // The unit failed already; this flush only settles what it handed over.
    }
  }
}

// Called inside the handler of the unit's failure. A rollback that fails is the sink's
// failure, never the record's: `rollback_failed` says so (process_unit blames no record for
// it), with the original failure nested inside.
template <class Config>
inline void pipeline_impl<Config>::roll_back_after_failure() {
  const std::exception_ptr original = std::current_exception();
  try {
    sink_->rollback();
  } catch (...) {
    const std::string why = describe(std::current_exception());
    try {
      std::rethrow_exception(original);
    } catch (...) {
      std::throw_with_nested(rollback_failed(why));
    }
  }
}

template <class Config>
template <class E>
inline void pipeline_impl<Config>::put_dead_letter(record_ref r, const E& event,
                                                   const char* reason) {
  if constexpr (has_dead_letters) {
    if constexpr (partitioned_dead_letter_sink<DeadLetters, E>)
      dead_letters_->put(r.partition, r.at, event, reason);
    else
      dead_letters_->put(r.at, event, reason);
    notify<events::dead_lettered>(r.at);
  }
}

template <class Config>
inline bool pipeline_impl<Config>::is_skipped(record_ref r) const noexcept {
  return !skipped_.empty() && std::find(skipped_.begin(), skipped_.end(), r) != skipped_.end();
}

// AutoCommit: whenever the interval has passed, commit the last *polled* position, whether or
// not its records were written. This is the hazard the type reports as MayLoseAndDuplicate.
template <class Config>
inline void pipeline_impl<Config>::tick() {
  if constexpr (auto_commit) {
    const time_point now = Clock::now();
    if (now - last_auto_commit_ >= settings_.auto_commit_interval) {
      for (partition_entry& e : parts_.all()) {
        // Each partition read past its committed position. A single-partition source's one
        // partition is committed at every fire, read past or not, as it always was (the
        // week-of-crashes model predicts every fire: examples/week_of_crashes.hpp).
        if (!partitioned || e.committed < e.read) {
          store_->commit(e.id, e.read);
          e.committed = e.read;
          notify<events::auto_committed>(e.read);
        }
      }
      last_auto_commit_ = now;
    }
  }
}

template <class Config>
void pipeline_impl<Config>::wait_for_world(std::size_t attempt) {
  const std::chrono::milliseconds wait = settings_.world_backoff.before(attempt);
  notify<events::world_retried>(attempt, wait);
  if (wait.count() > 0)
    std::this_thread::sleep_for(wait);
}

template <class Config>
inline void pipeline_impl<Config>::fault([[maybe_unused]] fault_point::kind where,
                                         [[maybe_unused]] step_kind step,
                                         [[maybe_unused]] std::size_t index,
                                         [[maybe_unused]] std::size_t row,
                                         [[maybe_unused]] position unit_end,
                                         [[maybe_unused]] std::size_t unit_index) {
  if constexpr (faults_enabled) {
    faults_.at(fault_point{where, step, index, row, unit_end, unit_index});
  }
}

// A failure retry_world may get past by trying again: the world's, and not one that trying
// again cannot change (a rollback that failed left the sink's state unknown; a key that
// moved partition is still moved) or could make worse (a commit whose outcome is unknown may
// have taken effect: done again, the unit would be applied twice).
template <class Config>
inline bool pipeline_impl<Config>::world_may_pass(const std::exception& e) noexcept {
  return dynamic_cast<const infrastructure_error*>(&e) != nullptr &&
         dynamic_cast<const rollback_failed*>(&e) == nullptr &&
         dynamic_cast<const key_moved_partition*>(&e) == nullptr &&
         dynamic_cast<const outcome_unknown*>(&e) == nullptr;
}

}  // namespace commit_order::detail
