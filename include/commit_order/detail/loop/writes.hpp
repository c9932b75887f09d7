// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/writes.hpp — the write loop: a unit's rows, on the pipeline's thread
// (private).
//
// The one place where the loop is shaped for a compiler (rows_apart); the measurements that
// justify the shape are in docs/performance.md, "The write loop".
#pragma once

#include <exception>
#include <new>
#include <utility>

#include "commit_order/detail/loop/surface.hpp"

namespace commit_order::detail {

/// The loop takes one shape or another where g++ and clang allocate registers differently.
inline constexpr bool compiled_by_clang =
#if defined(__clang__)
    true;
#else
    false;
#endif

/// A unit's rows are written by write_rows_apart, a function of their own, where nothing but the
/// sink runs per row (no observer of rows, no timer or fault point after a row; retries and dead
/// letters take write_handled first) and the unit is not a transaction (its dead letters are
/// skipped per row), by every compiler but clang. Why, measured on both compilers:
/// docs/performance.md, "The write loop".
template <class Config>
inline constexpr bool rows_apart_v =
    !compiled_by_clang && !loop_traits<Config>::tx_unit && !loop_traits<Config>::row_timer &&
    !loop_traits<Config>::faults_enabled &&
    !observes<typename Config::observer_type, events::row_written, offset> &&
    !observes<typename Config::observer_type, events::replay_absorbed, offset>;

// The rows of one unit, on the pipeline's thread.
template <class Config>
template <step_kind Step, std::size_t Index, class It>
inline void pipeline_impl<Config>::write_rows(It first, It last, position unit_end,
                                              std::size_t unit_index, unit_failure& failure) {
  if constexpr (per_record_handling) {
    std::size_t row = 0;
    for (It it = first; it != last; ++it) {
      write_handled(ref_of(*it), event_of(*it), failure);
      if constexpr (auto_commit)
        tick();
      fault(fault_point::kind::after_row, Step, Index, ++row, unit_end, unit_index);
    }
  } else if constexpr (rows_apart_v<Config>) {
    // A unit of one row is written in place (a call would cost a batch of one more than the
    // loop saves); a longer one by write_rows_apart, which leaves a trace of the row it is at.
    It at = first;
    try {
      if (first + 1 == last) {
        write_row(sink_.sink(), first);
      } else {
        write_rows_apart(sink_.sink(), first, last, at);
      }
    } catch (const infrastructure_error&) {
      throw;  // the world's failure, not the record's: no handling blames the record
    } catch (const std::bad_alloc&) {
      throw;  // the process ran out of memory: the world's, whatever the record
    } catch (const std::exception&) {
      failure.record = ref_of(*at);
      throw;
    }
  } else {
    // One handler for the whole loop: it reads the failing record from `it`, so the loop
    // itself carries nothing extra for the failure path.
    // The sink is held in a local: through the member pointer, every write could (for all
    // the compiler knows) have changed it, and each record would reload it.
    Sink& sink = sink_.sink();
    It it = first;
    // A failing timer commit, carried out of the loop's handler.
    [[maybe_unused]] std::conditional_t<row_timer, std::exception_ptr, nothing> timer_failure{};
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
          try {
            tick();
          } catch (...) {
            timer_failure = std::current_exception();
            break;
          }
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
      failure.record = ref_of(*it);
      throw;
    }
    if constexpr (row_timer) {
      if (timer_failure)
        std::rethrow_exception(timer_failure);
    }
  }
}

template <class Config>
template <class It>
inline void pipeline_impl<Config>::write_row(Sink& sink, It it) {
  SinkPart::apply(sink, partition_of(*it), offset_of(*it), Transform{}(event_of(*it)));
}

// The rows of a unit of more than one, where nothing but the sink runs per row (rows_apart): a
// static function, so its loop holds the sink, the record, the end and the trace's address, not
// the pipeline. What it calls is folded into it where the compiler can (flatten: not what is
// marked noinline, such as a table's growth), the sink's write included. It leaves no handler
// (one in this loop changes how g++ 12 builds the row: +4 instructions per row), only a trace
// of the row it is at, which write_rows reads when the sink throws: one store per row.
template <class Config>
template <class It>
void pipeline_impl<Config>::write_rows_apart(Sink& sink, It it, const It last, It& at) {
  do {
    at = it;
    write_row(sink, it);
  } while (++it != last);
}

template <class Config>
template <class E>
inline void pipeline_impl<Config>::write_handled(record_ref r, const E& event,
                                                 unit_failure& failure) {
  std::size_t attempt = 0;
  [[maybe_unused]] std::size_t world_tries = 0;
  for (;;) {
    try {
      apply_one(sink_.sink(), r.partition, r.at, event);
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
        failure.world_spent = true;
      }
      throw;
    } catch (const std::bad_alloc&) {
      throw;  // the process ran out of memory: the world's, whatever the record
    } catch (const std::exception& e) {
      if (attempt < Handling::retries) {
        notify_retry(r.at, ++attempt);
        continue;
      }
      failure.record = r;
      if constexpr (Handling::dead_letters) {
        put_dead_letter(r, event, e.what());
        failure.record.reset();
        return;
      }
      throw;
    }
  }
}

template <class Config>
template <class E>
inline void pipeline_impl<Config>::apply_one(Sink& sink, partition_id k, offset o, const E& event) {
  decltype(auto) row = transform_(event);
  if constexpr (std::is_same_v<decltype(SinkPart::apply(sink, k, o, row)), write_outcome> &&
                observes<observer_type, events::replay_absorbed, offset>) {
    if (SinkPart::apply(sink, k, o, row) == write_outcome::absorbed) {
      notify<events::replay_absorbed>(o);
      return;
    }
  } else {
    SinkPart::apply(sink, k, o, row);
  }
  notify<events::row_written>(o);
}

}  // namespace commit_order::detail
