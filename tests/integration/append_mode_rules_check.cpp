// SPDX-License-Identifier: BSL-1.0
// Build-only evidence (no doctest; building is passing) that the plain-append SQLite sink is
// kept out of every policy that replays or folds the position into the sink, as verdict types.
// The regex-matched diagnostics of the same misuses are tests/compile_fail/cases/sqlite_*.cpp.
#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"

namespace co = commit_order;
namespace sq = commit_order::sqlite;

namespace {
using log_t = co::file::log<crash_lab::order_event>;
using append_t = sq::append_sink<crash_lab::orders_flat>;
using upsert_t = sq::upsert_sink<crash_lab::orders_flat>;
using guarded_t = sq::guarded_upsert_sink<crash_lab::orders_flat>;
using store_t = co::file::position_store;
}  // namespace

// The control: the one policy append mode is fit for compiles.
static_assert(co::can_make_pipeline<log_t, append_t, co::AtMostOnce<>, co::with_store<store_t>>);

// R3 — AtLeastOnce replays, and an append table stores the replay as a duplicate row.
static_assert(!co::can_make_pipeline<log_t, append_t, co::AtLeastOnce<>, co::with_store<store_t>>);
static_assert(
    std::is_same_v<co::verdict_t<log_t, append_t, co::AtLeastOnce<>, co::with_store<store_t>>,
                   co::rules::replay_needs_idempotent_sink>);

// R5 — append mode is Transactional, but TransactionalPosition also needs the offset guard.
static_assert(!co::can_make_pipeline<log_t, append_t, co::TransactionalPosition<>>);
static_assert(std::is_same_v<co::verdict_t<log_t, append_t, co::TransactionalPosition<>>,
                             co::rules::transactional_position_needs_offset_guard>);

// R1 — AutoCommit needs a keyed sink.
static_assert(!co::can_make_pipeline<log_t, append_t, co::AtMostOnce<co::AutoCommit>,
                                     co::with_store<store_t>>);
static_assert(std::is_same_v<co::verdict_t<log_t, append_t, co::AtMostOnce<co::AutoCommit>,
                                           co::with_store<store_t>>,
                             co::rules::auto_commit_needs_idempotent_sink>);

// The unguarded upsert is fit for AtLeastOnce and AutoCommit, not for TransactionalPosition.
static_assert(co::can_make_pipeline<log_t, upsert_t, co::AtLeastOnce<>, co::with_store<store_t>>);
static_assert(std::is_same_v<co::verdict_t<log_t, upsert_t, co::TransactionalPosition<>>,
                             co::rules::transactional_position_needs_offset_guard>);

// The guarded upsert is fit for all three.
static_assert(co::can_make_pipeline<log_t, guarded_t, co::TransactionalPosition<>>);
static_assert(co::can_make_pipeline<log_t, guarded_t, co::AtLeastOnce<>, co::with_store<store_t>>);

// R9 follows the step order. AtMostOnce makes the position durable first: a Buffered store
// cannot vouch for a Synced sink (a power loss would replay into rows the sink kept).
static_assert(
    std::is_same_v<co::verdict_t<log_t, append_t, co::AtMostOnce<>,
                                 co::with_store<co::memory::position_store<co::Buffered>>>,
                   co::rules::store_less_durable_than_sink>);
// AtLeastOnce makes the write durable first: a Synced sink with a Buffered store only replays.
static_assert(co::can_make_pipeline<log_t, guarded_t, co::AtLeastOnce<>,
                                    co::with_store<co::memory::position_store<co::Buffered>>>);
// ...but a Buffered sink (synchronous=NORMAL) behind a Synced store loses rows a position
// vouches for.
static_assert(std::is_same_v<
              co::verdict_t<log_t, sq::guarded_upsert_sink<crash_lab::orders_flat, sq::wal_normal>,
                            co::AtLeastOnce<>, co::with_store<store_t>>,
              co::rules::sink_less_durable_than_store>);
// R9c: a log synced only on flush cannot back a Synced position.
static_assert(std::is_same_v<
              co::verdict_t<crash_lab::order_producer_log, guarded_t, co::TransactionalPosition<>>,
              co::rules::source_less_durable_than_position>);
