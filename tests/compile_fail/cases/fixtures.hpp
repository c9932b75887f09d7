// SPDX-License-Identifier: BSL-1.0
// The parts every compile-fail case is built from: the seeds' order events, tables of each
// capability set and position stores of each durability. A case and its twin differ in one
// part only, so the rule under test -- not a typo elsewhere -- is what fails.
//
// A case includes <commit_order/commit_order.hpp> itself, before this header, as a user's file
// would: the include chain is part of the diagnostic the case measures.
#pragma once

#include <cstdint>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace cf {

namespace co = commit_order;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t event_seq = 0;
  std::int64_t total_cents = 0;
};

/// The idempotency key: a projection of the event, nothing else.
using order_key = co::key<&order_event::order_id>;
using order_log = co::memory::log<order_event>;
/// The same log standing for one that is fsync'ed on append, for cases whose position is
/// durable (rule R9c: the source must be at least as durable as the position).
using synced_log = co::memory::log<order_event, co::Synced>;

/// `orders_flat` with the given capabilities, keyed on the event.
template <class... Caps>
using order_table = co::memory::table<order_event, order_key, co::capabilities<Caps...>>;
/// Plain append: every write is a new row.
using append_table = co::memory::table<order_event, co::no_key, co::capabilities<>>;
/// Keyed upsert, last writer wins.
using upsert_table = order_table<co::Idempotent>;
/// Keyed upsert guarded by source offset, with the position in the same transaction.
using guarded_tx_table = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional>;

using volatile_store = co::memory::position_store<co::Volatile>;
using synced_store = co::memory::position_store<co::Synced>;

}  // namespace cf
