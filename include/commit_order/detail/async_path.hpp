// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/async_path.hpp — the loop's part for writes handed to an executor
// (private; included through commit_order/executor.hpp).
//
// A pipeline configured `with_executor<E>` hands each record's write to the executor and moves
// its position through the writes' completion (async_writes) instead of the unit's end. All of
// that — the shared state, its mutex and condition variable, the tasks, the failures reported
// from workers — lives here, so a synchronous pipeline neither parses nor instantiates it:
// pipeline_impl only names `async_path<Config>` in a member whose type is chosen by
// `has_executor`, and calls it under `if constexpr (async)`.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "commit_order/detail/async_writes.hpp"
#include "commit_order/detail/pipeline_impl.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/observer.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"

namespace commit_order::detail {

template <class Config>
class async_path final {
  using traits = loop_traits<Config>;
  using Executor = typename Config::executor_type;
  using Transform = typename Config::transform_type;
  using Handling = typename Config::error_handling_type;
  using Event = typename traits::event_type;
  static constexpr bool tracked_commit = traits::tracked_commit;

  // An executor that can run its queued tasks on request (the testing kit's manual executor)
  // is driven while the pipeline waits; any other executor is waited for.
  static constexpr bool drivable = requires(Executor & e) {
    { e.drive() } -> std::convertible_to<bool>;
  };

 public:
  void bind(Executor& e) noexcept { executor_ = &e; }

  /// Waits (or drives the executor) until fewer than `n` writes are in flight.
  void wait_below(std::size_t n) {
    if constexpr (drivable) {
      while (state_->outstanding() >= n && executor_->drive()) {
      }
    } else {
      state_->wait_below(n);
    }
  }
  void wait_idle() { wait_below(1); }

  /// Recovery: whatever an earlier run handed out has finished or been abandoned; forget it.
  void restart() {
    wait_idle();
    state_->clear();
  }
  void reset(partition_id k, position start) { state_->reset(k, start); }
  void forget(partition_id k) { state_->forget(k); }

  /// Hands the write of one record to the executor, after waiting for room (back-pressure: the
  /// poll waits for the workers).
  template <class Sink, class E>
  void hand_out(Sink* sink, std::size_t max_in_flight, backoff waits, partition_id k, offset o,
                const E& event) {
    wait_below(max_in_flight);
    // The ticket registers the record; if the task never runs (the executor drops it, or
    // cannot take it), the ticket's destructor reports the record as failed.
    auto ticket = std::make_shared<async_ticket<Event>>(state_, k, o, Event(event));
    executor_->execute([ticket, sink, waits] {
      (void)waits;  // read only under retry_world
      ticket->ran = true;
      std::exception_ptr error;
      [[maybe_unused]] std::size_t world_tries = 0;
      for (std::size_t attempt = 0;;) {
        try {
          sink_part<traits::partitioned, Sink>::apply(*sink, ticket->partition, ticket->at,
                                                      Transform{}(ticket->event));
          error = nullptr;
          break;
        } catch (const infrastructure_error& x) {
          error = std::current_exception();  // the world's failure: never retried as the record's
          // retry_world tries the write again on this worker (unreported to the observer,
          // which runs on the pipeline's thread only).
          if constexpr (world_retries_v < Handling >> 0) {
            if (dynamic_cast<const key_moved_partition*>(&x) == nullptr &&
                dynamic_cast<const outcome_unknown*>(&x) == nullptr &&
                world_tries < world_retries_v<Handling>) {
              const auto wait = waits.before(++world_tries);
              if (wait.count() > 0)
                std::this_thread::sleep_for(wait);
              continue;
            }
          }
          break;
        } catch (...) {
          error = std::current_exception();
          if (attempt++ >= Handling::retries)
            break;
        }
      }
      // Reported outside the retry loop: bookkeeping never causes a second write.
      if (error) {
        ticket->state->failed(ticket->partition, ticket->at, ticket->event, std::move(error));
      } else {
        ticket->state->completed(ticket->partition, ticket->at);
      }
    });
  }

  /// Commits partition `e`'s position up to its lowest incomplete record, if that moved.
  template <class Loop, class Entry>
  void commit_completed(Loop& loop, Entry& e) {
    const std::optional<position> done = state_->committable(e.id);
    if (done && e.committed < *done) {
      loop.store_->commit(e.id, *done);
      e.committed = *done;
      loop.notify_unit_committed(*done);
    }
  }

  /// Out-of-order completion: cover what has completed, never what is still running.
  template <class Loop>
  void commit_all_completed(Loop& loop) {
    for (auto& e : loop.parts_.all())
      commit_completed(loop, e);
  }

  /// Failed records reported by workers: dead-lettered here (the position may then pass them),
  /// or the pipeline stops once everything in flight has finished, naming the first failure.
  template <class Loop>
  void settle_failures(Loop& loop) {
    auto failures = state_->take_failures();
    if (failures.empty())
      return;
    std::sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) {
      return std::pair(a.partition, a.at) < std::pair(b.partition, b.at);
    });
    // A failure of the sink itself is nobody's record: it is not dead-lettered, and the position
    // stays below it. Everything in flight finishes first, then it propagates as it is.
    for (const auto& f : failures) {
      if (is_infrastructure(f.error)) {
        wait_idle();
        if constexpr (tracked_commit)
          commit_all_completed(loop);
        std::rethrow_exception(f.error);
      }
    }
    if constexpr (Handling::dead_letters) {
      for (auto& f : failures) {
        loop.put_dead_letter({f.partition, f.at}, f.event, Loop::describe(f.error).c_str());
        state_->settled(f.partition, f.at);
      }
    } else {
      wait_idle();
      if constexpr (tracked_commit)
        commit_all_completed(loop);
      const auto& first = failures.front();
      loop.template notify<events::record_failed>(first.at);
      const position committed = loop.committed_position(first.partition);
      try {
        std::rethrow_exception(first.error);
      } catch (const std::exception& e) {
        std::throw_with_nested(record_failed(first.at, committed, e.what(), first.partition));
      } catch (...) {
        std::throw_with_nested(
            record_failed(first.at, committed, "a non-standard exception", first.partition));
      }
    }
  }

  /// The source is drained: let everything in flight finish, then commit what completed.
  template <class Loop>
  void finish_in_flight(Loop& loop) {
    wait_idle();
    settle_failures(loop);
    if constexpr (tracked_commit)
      commit_all_completed(loop);
  }

 private:
  static bool is_infrastructure(const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const infrastructure_error&) {
      return true;
    } catch (...) {
      return false;
    }
  }

  Executor* executor_ = nullptr;
  // Shared with the tasks: a task may outlive the pipeline in an executor that drops it late.
  std::shared_ptr<async_writes<Event>> state_ = std::make_shared<async_writes<Event>>();
};

}  // namespace commit_order::detail
