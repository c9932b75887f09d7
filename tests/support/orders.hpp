// SPDX-License-Identifier: BSL-1.0
// The test fixtures, written once: the running example (docs/reference.md) — order events
// flattened into `orders_flat`, keyed by order_id, where later events update earlier orders —
// with a table of every capability set the rules tell apart, position stores of each
// durability, a log of each, and a manual clock. The unit, concurrency, crash and integration
// tests, the compile-fail cases (tests/compile_fail/cases/fixtures.hpp), the legality-table
// generator and the benchmark all build on these; a rule's case and its twin then differ in one
// part only.
#pragma once

#include <chrono>
#include <cstdint>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace test_support {

namespace co = commit_order;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  friend bool operator==(const order_event&, const order_event&) = default;
};

/// The idempotency key: a projection of the event, nothing else.
using order_key = co::key<&order_event::order_id>;
using order_log = co::memory::log<order_event>;
/// The same log standing for one that is fsync'ed on append, for configurations whose position
/// is durable (rule R9c: the source must be at least as durable as the position).
using synced_log = co::memory::log<order_event, co::Synced>;

/// `orders_flat` with the given capabilities, keyed on the event.
template <class... Caps>
using order_table = co::memory::table<order_event, order_key, co::capabilities<Caps...>>;

/// Keyed upsert, guarded by source offset, with position-in-transaction: TransactionalPosition.
using guarded_tx_table = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional>;
/// Keyed upsert, guarded: AtLeastOnce.
using guarded_table = order_table<co::Idempotent, co::OffsetGuarded>;
/// Keyed upsert, last writer wins.
using upsert_table = order_table<co::Idempotent>;
/// Plain append: every write is a new row.
using append_table = co::memory::table<order_event, co::no_key, co::capabilities<>>;
/// A transactional log (a topic written by a transactional producer, as a read_committed reader
/// sees it): it appends, and its position commits with its rows. TransactionalPosition needs no
/// guard of it (R5): nothing is overwritten.
using transactional_log =
    co::memory::table<order_event, co::no_key, co::capabilities<co::AppendOnly, co::Transactional>>;

/// Position stores of each durability the tests pair with the (Volatile) tables and logs.
using volatile_store = co::memory::position_store<co::Volatile>;
using synced_store = co::memory::position_store<co::Synced>;
using store = volatile_store;

/// A clock the test moves by hand, so AutoCommit's timer runs in virtual time.
struct manual_clock {
  using rep = std::int64_t;
  using period = std::milli;
  using duration = std::chrono::milliseconds;
  using time_point = std::chrono::time_point<manual_clock>;
  static constexpr bool is_steady = true;
  static inline time_point current{};
  static time_point now() noexcept { return current; }
  static void advance(duration d) noexcept { current += d; }
};

/// `n` events over `orders` distinct orders: event i updates order i % orders to total i.
inline order_log make_log(std::int64_t n, std::int64_t orders) {
  order_log log;
  for (std::int64_t i = 0; i < n; ++i)
    log.append(order_event{i % orders, 100 + i % 7, i});
  return log;
}

}  // namespace test_support
