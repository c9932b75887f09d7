// commit_order/observer.hpp — what a pipeline reports while it runs.
//
// An observer implements any subset of the hooks below; the pipeline calls only the ones that
// exist, so the default observer (no hooks) compiles to nothing. `counting_observer` counts
// every event, which is what tests and dashboards usually want.
#pragma once

#include <cstddef>

#include "commit_order/offset.hpp"

namespace commit_order {

/// The default: no hooks, no state, no cost.
struct no_observer final {};

/// Counts what happened. Attach it with `with_observer<counting_observer>`.
struct counting_observer final {
  std::size_t polls = 0;             ///< non-empty polls
  std::size_t records_polled = 0;    ///< records handed out by the source
  std::size_t rows_written = 0;      ///< rows the sink applied
  std::size_t replays_absorbed = 0;  ///< rows the offset guard kept (a replay, absorbed)
  std::size_t units_committed = 0;   ///< units whose position became durable
  std::size_t auto_commits = 0;      ///< timer commits (AutoCommit)
  std::size_t retries = 0;           ///< re-attempts after a failed record
  std::size_t dead_lettered = 0;     ///< records given to the dead-letter sink
  std::size_t records_failed = 0;    ///< failures that stopped the pipeline

  void on_poll(std::size_t records, position) noexcept {
    ++polls;
    records_polled += records;
  }
  void on_row_written(offset) noexcept { ++rows_written; }
  void on_replay_absorbed(offset) noexcept { ++replays_absorbed; }
  void on_unit_committed(position) noexcept { ++units_committed; }
  void on_auto_commit(position) noexcept { ++auto_commits; }
  void on_retry(offset, std::size_t) noexcept { ++retries; }
  void on_dead_letter(offset) noexcept { ++dead_lettered; }
  void on_record_failed(offset) noexcept { ++records_failed; }
};

}  // namespace commit_order
