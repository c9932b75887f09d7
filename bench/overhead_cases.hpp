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

namespace overhead {

namespace co = commit_order;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
};
using order_key = co::key<&order_event::order_id>;
using order_log = co::memory::log<order_event>;
using store = co::memory::position_store<>;

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
using amo_table = co::memory::table<order_event, co::no_key, co::capabilities<>>;
using alo_table =
    co::memory::table<order_event, order_key, co::capabilities<co::Idempotent, co::OffsetGuarded>>;
using tx_table =
    co::memory::table<order_event, order_key,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>>;

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

/// State shared by the three variants: one log, one table, one store.
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
  /// One batch; returns the records handled (0 at the end of the round).
  [[gnu::noinline]] std::size_t step() { return p->poll_once(); }
};

/// The hand-written twin: the same steps in the same order, no library.
template <class Policy>
struct handwritten_case {
  fixture<Policy> f;
  std::size_t batch;
  co::epoch owner{};  // TransactionalPosition: the epoch this consumer claimed

  explicit handwritten_case(std::size_t b) : batch(b) { reset(); }
  void reset() {
    f.reset();
    // Recovery, as a careful engineer writes it: load, check, seek.
    std::optional<co::position> stored;
    if constexpr (std::is_same_v<Policy, co::TransactionalPosition<>>) {
      // Two consumers of one table must not both write: claim the position row for an epoch
      // above its owner's (the pipeline's default when no owner epoch is configured).
      f.table.begin();
      const co::claimed c = f.table.claim_next();
      owner = c.owner;
      stored = c.stored;
      f.table.commit();
    } else {
      stored = f.st.load();
    }
    const co::position start = stored.value_or(f.log.earliest());
    if (start < f.log.earliest())
      throw co::position_lost(start, f.log.earliest());
    f.log.seek(start);
  }
  [[gnu::noinline]] std::size_t step() {
    const auto all = f.log.poll(batch);
    if (all.empty())
      return 0;
    // A careful loop honours the sink's transaction limit too: split, one position per split.
    const std::size_t limit = f.table.max_transaction_rows();
    if (limit != 0 && limit < all.size()) {
      for (std::size_t done = 0; done < all.size(); done += limit) {
        unit(all.subspan(done, std::min(limit, all.size() - done)));
      }
    } else {
      unit(all);
    }
    return all.size();
  }

  template <class Records>
  void unit(Records records) {
    const co::position end = co::position::after(records.back().source_offset);
    if constexpr (std::is_same_v<Policy, co::AtMostOnce<>>) {
      f.st.commit(end);
      for (const auto& r : records)
        f.table.apply(r.source_offset, r.event);
    } else if constexpr (std::is_same_v<Policy, co::AtLeastOnce<>>) {
      for (const auto& r : records)
        f.table.apply(r.source_offset, r.event);
      f.st.commit(end);
    } else {
      f.table.begin();
      try {
        for (const auto& r : records)
          f.table.apply(r.source_offset, r.event);
        f.table.store_position(end, owner);
        f.table.commit();
      } catch (...) {
        f.table.rollback();
        throw;
      }
    }
  }
};

/// The floor: the sink's writes alone, over the same records in the same batches, with no
/// position work at all. Not a correct consumer — the limit nothing can go below.
template <class Policy>
struct raw_sink_case {
  fixture<Policy> f;
  std::size_t batch;

  explicit raw_sink_case(std::size_t b) : batch(b) { reset(); }
  void reset() { f.reset(); }
  [[gnu::noinline]] std::size_t step() {
    const auto records = f.log.poll(batch);
    for (const auto& r : records)
      f.table.apply(r.source_offset, r.event);
    return records.size();
  }
};

/// The table's content in its own order, to check that a pipeline and its twin did the same work.
template <class Table>
std::vector<std::pair<std::int64_t, std::int64_t>> snapshot(const Table& t) {
  std::vector<std::pair<std::int64_t, std::int64_t>> rows;
  t.for_each([&](const auto& r) { rows.emplace_back(r.row.total_cents, r.source_offset.value()); });
  return rows;
}

}  // namespace overhead
