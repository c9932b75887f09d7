// SPDX-License-Identifier: BSL-1.0
// The orders of the running example (docs/reference.md), as the PostgreSQL tests write them:
// `orders_flat` keyed by order_id, every row with the partition and offset it came from; a
// per-order version (event_seq) for the version guard; an append table; and a table of every column
// type.
#pragma once

#include <cstdint>
#include <string>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

namespace pg_test {

namespace co = commit_order;
namespace pg = commit_order::postgres;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  std::int64_t event_seq = 0;
  friend bool operator==(const order_event&, const order_event&) = default;
};

struct orders_flat final
    : pg::table_layout<"orders_flat", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"customer_id", &order_event::customer_id>,
                                         pg::column<"total_cents", &order_event::total_cents>,
                                         pg::column<"event_seq", &order_event::event_seq>>> {};

struct orders_log final
    : pg::table_layout<"orders_log", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"customer_id", &order_event::customer_id>,
                                         pg::column<"total_cents", &order_event::total_cents>,
                                         pg::column<"event_seq", &order_event::event_seq>>> {};

template <class Durability = pg::buffered>
using guarded = pg::guarded_upsert_sink<orders_flat, Durability>;
template <class Durability = pg::buffered>
using versioned = pg::version_guarded_sink<orders_flat, &order_event::event_seq, Durability>;
template <class Durability = pg::buffered>
using upserting = pg::upsert_sink<orders_flat, Durability>;
template <class Durability = pg::buffered>
using appending = pg::append_sink<orders_log, Durability>;

/// Options for a sink whose tables live in `schema`.
inline pg::sink_options in_schema(const std::string& schema, std::string stream = "orders") {
  pg::sink_options o;
  o.schema = schema;
  o.stream = std::move(stream);
  return o;
}

}  // namespace pg_test
