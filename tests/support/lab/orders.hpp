// SPDX-License-Identifier: BSL-1.0
// support/lab/orders.hpp — the running example (docs/reference.md) on real parts: order
// events in a file log, flattened into the SQLite table `orders_flat`. Its own event type, not
// the tests' fixtures: it carries `event_seq`, which the reconciliation reads, and the lab is a
// program a reader runs and reads on its own.
//
// Every event carries a per-order sequence number (`event_seq`, 1 for the event that creates
// the order, then 2, 3, ... for the updates): whatever row a table shows for an order, the
// sequence says which event it reflects, so a row that went back to an older event — a
// replay overwriting newer data — is visible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <vector>

#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/sqlite.hpp>

namespace crash_lab {

namespace co = commit_order;
namespace sq = commit_order::sqlite;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  std::int64_t event_seq = 0;
  friend bool operator==(const order_event&, const order_event&) = default;
};

/// orders_flat, keyed by order_id; every row carries the source offset it came from.
struct orders_flat final
    : sq::table_layout<"orders_flat", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"customer_id", &order_event::customer_id>,
                                         sq::column<"total_cents", &order_event::total_cents>,
                                         sq::column<"event_seq", &order_event::event_seq>>> {};

/// The log the lab consumes: every record it holds is durable (Synced), as rule R9c demands of
/// a source whose positions are kept durably. Small segments, so consumers cross segment
/// boundaries.
using order_log = co::file::log<order_event>;
/// The same log as the producer writes it: buffered appends and one flush at the end (the
/// producer is not under test), after which every record is as durable as `order_log` says.
using order_producer_log =
    co::file::log<order_event, co::file::trivial_codec<order_event>, co::file::sync_on_flush>;

inline co::file::log_options lab_log_options() {
  return co::file::log_options{.segment_bytes = 16 * 1024};
}

/// `records` events over `orders` orders: each event picks an order at random, so most events
/// update an order an earlier event created.
inline std::vector<order_event> generate_orders(std::int64_t records, std::int64_t orders,
                                                std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick_order(1, orders);
  std::uniform_int_distribution<std::int64_t> pick_total(100, 500000);
  std::map<std::int64_t, std::int64_t> seq;
  std::vector<order_event> events;
  events.reserve(static_cast<std::size_t>(records));
  for (std::int64_t i = 0; i < records; ++i) {
    const std::int64_t id = pick_order(rng);
    events.push_back(order_event{id, 100 + (id * 7919) % 53, pick_total(rng), ++seq[id]});
  }
  return events;
}

/// Writes generate_orders(records, orders, seed) into a fresh log in `dir`.
inline void write_orders(const std::filesystem::path& dir, std::int64_t records,
                         std::int64_t orders, std::uint64_t seed) {
  std::filesystem::remove_all(dir);
  order_producer_log log(dir, lab_log_options());
  for (const order_event& e : generate_orders(records, orders, seed))
    log.append(e);
  log.flush();
}

/// Every event of the log, by offset (the reconciliation's ground truth).
inline std::vector<order_event> read_orders(const std::filesystem::path& dir) {
  order_log log(dir, lab_log_options());
  std::vector<order_event> events;
  log.seek(log.earliest());
  for (;;) {
    const auto batch = log.poll(4096);
    if (batch.empty())
      break;
    for (const auto& r : batch)
      events.push_back(r.event);
  }
  return events;
}

}  // namespace crash_lab
