// SPDX-License-Identifier: BSL-1.0
// The cases of the overhead benchmark: for each policy and batch size, the pipeline, the loop a
// careful engineer would write by hand for the same steps, and the raw sink alone (the floor).
// All three consume the same in-memory log into the same in-memory table.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include "support/orders.hpp"

namespace overhead {

namespace co = commit_order;

// The tests' shared fixtures (tests/support/orders.hpp).
using test_support::order_event;
using test_support::order_key;
using test_support::order_log;
using test_support::store;

/// Records per round: the log is consumed once per round, then everything is reset.
inline constexpr std::int64_t log_size = 1 << 15;
/// Distinct orders: the table holds at most this many rows.
inline constexpr std::int64_t orders = 1024;

inline order_log make_log() {
  order_log log;
  for (std::int64_t i = 0; i < log_size; ++i)
    log.append(order_event{i % orders, i % 97, i});
  return log;
}

// The weakest sink each policy's rules allow, as a user would pick it.
using amo_table = test_support::append_table;
using alo_table = test_support::guarded_table;
using tx_table = test_support::guarded_tx_table;

template <class Policy>
struct policy_traits;
template <>
struct policy_traits<co::AtMostOnce<>> {
  using table = amo_table;
  static constexpr const char* name = "AtMostOnce";
};
template <>
struct policy_traits<co::AtLeastOnce<>> {
  using table = alo_table;
  static constexpr const char* name = "AtLeastOnce";
};
template <>
struct policy_traits<co::TransactionalPosition<>> {
  using table = tx_table;
  static constexpr const char* name = "TransactionalPosition";
};

/// An empty member.
struct none {};

/// State shared by the variants: one log, one table, one store.
template <class Policy>
struct fixture {
  using table_t = typename policy_traits<Policy>::table;
  order_log log = make_log();
  table_t table{};
  store st{};

  void reset() {
    table = table_t{};
    st = store{};
    log.seek(log.earliest());
  }
};

/// The library: `pipeline<...>` with default options.
template <class Policy>
struct pipeline_case {
  using table_t = typename policy_traits<Policy>::table;
  using pipeline_t =
      std::conditional_t<co::policy_facts_v<Policy>.uses_position_store,
                         co::pipeline<order_log, table_t, Policy, co::with_store<store>>,
                         co::pipeline<order_log, table_t, Policy>>;

  fixture<Policy> f;
  std::optional<pipeline_t> p;
  std::size_t batch;

  explicit pipeline_case(std::size_t b) : batch(b) { reset(); }
  void reset() {
    f.reset();
    if constexpr (co::policy_facts_v<Policy>.uses_position_store) {
      p.emplace(f.log, f.table, f.st, co::settings{.batch_size = batch});
    } else {
      p.emplace(f.log, f.table, co::settings{.batch_size = batch});
    }
    p->recover();
  }
  /// One batch; returns the records handled (0 at the end of the round). Defined in
  /// overhead_loops.hpp (see there).
  [[gnu::noinline]] std::size_t step();
};

/// How a hand-written loop reaches its parts: as members of its own object (`owned`, the twin
/// the targets are read against), or through pointers to parts that live elsewhere
/// (`referenced`), as `pipeline` does and as any consumer class that does not own its log, table
/// and store must.
enum class parts { owned, referenced };

/// The hand-written twin: the same steps in the same order, no library.
template <class Policy, parts Access>
struct handwritten_loop {
  using table_t = typename policy_traits<Policy>::table;
  fixture<Policy> f;
  std::size_t batch;
  co::epoch owner{};  // TransactionalPosition: the epoch this consumer claimed
  struct pointers {
    order_log* log;
    table_t* table;
    store* st;
  };
  // The referenced twin's pointers to the fixture's parts, read from memory on every use like
  // the pipeline's; the owned twin has none.
  [[no_unique_address]] std::conditional_t<Access == parts::referenced, pointers, overhead::none>
      refs;

  explicit handwritten_loop(std::size_t b) : batch(b) {
    if constexpr (Access == parts::referenced)
      refs = pointers{&f.log, &f.table, &f.st};
    reset();
  }
  order_log& log() {
    if constexpr (Access == parts::owned) {
      return f.log;
    } else {
      return *refs.log;
    }
  }
  table_t& table() {
    if constexpr (Access == parts::owned) {
      return f.table;
    } else {
      return *refs.table;
    }
  }
  store& st() {
    if constexpr (Access == parts::owned) {
      return f.st;
    } else {
      return *refs.st;
    }
  }

  void reset() {
    f.reset();
    // Recovery, as a careful engineer writes it: load, check, seek.
    std::optional<co::position> stored;
    if constexpr (std::is_same_v<Policy, co::TransactionalPosition<>>) {
      // Two consumers of one table must not both write: claim the position row for an epoch
      // above its owner's (the pipeline's default when no owner epoch is configured).
      table().begin();
      const co::claimed c = table().claim_next(co::partition_id{0});
      owner = c.owner;
      stored = c.stored;
      table().commit();
    } else {
      stored = st().load();
    }
    const co::position start = stored.value_or(log().earliest());
    if (start < log().earliest())
      throw co::position_lost(start, log().earliest());
    log().seek(start);
  }
  [[gnu::noinline]] std::size_t step();  // overhead_loops.hpp
  /// The steps of one unit of work (a batch, or one split of it).
  template <class Records>
  void unit(Records records);
};

/// The twin the targets are read against, its parts its own members.
template <class Policy>
using handwritten_case = handwritten_loop<Policy, parts::owned>;
/// The twin reaching its parts through pointers (see `parts`).
template <class Policy>
using handwritten_ref_case = handwritten_loop<Policy, parts::referenced>;

/// The floor: the sink's writes alone, over the same records in the same batches, with no
/// position work at all. Not a correct consumer — the limit nothing can go below.
template <class Policy>
struct raw_sink_case {
  fixture<Policy> f;
  std::size_t batch;

  explicit raw_sink_case(std::size_t b) : batch(b) { reset(); }
  void reset() { f.reset(); }
  [[gnu::noinline]] std::size_t step();  // overhead_loops.hpp
};

/// The table's content in its own order, to check that a pipeline and its twin did the same work.
template <class Table>
std::vector<std::pair<std::int64_t, std::int64_t>> snapshot(const Table& t) {
  std::vector<std::pair<std::int64_t, std::int64_t>> rows;
  t.for_each([&](const auto& r) { rows.emplace_back(r.row.total_cents, r.source_offset.value()); });
  return rows;
}

}  // namespace overhead
