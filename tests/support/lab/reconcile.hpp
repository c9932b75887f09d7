// SPDX-License-Identifier: BSL-1.0
// support/lab/reconcile.hpp — what the table holds, compared with what the log says.
//
// Run by the supervisor between children (no consumer is running), from the files alone: the
// SQLite table, the stored position, the log.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/sqlite.hpp>

#include "support/lab/orders.hpp"
#include "support/lab/pg_lab.hpp"
#include "support/lab/policies.hpp"

namespace crash_lab {

/// One row of orders_flat as stored.
struct table_row {
  order_event event;
  std::int64_t source_offset = 0;
};

/// The table and the stored position at one moment.
struct snapshot {
  std::vector<table_row> rows;  // in insertion (rowid) order
  std::optional<co::position> stored;

  /// The event_seq each order shows: its row, or for the append table its newest row (what a
  /// reader taking the latest insert sees).
  [[nodiscard]] std::map<std::int64_t, std::int64_t> visible_seq() const {
    std::map<std::int64_t, std::int64_t> seq;
    for (const auto& r : rows)
      seq[r.event.order_id] = r.event.event_seq;
    return seq;
  }
};

/// Reads the PostgreSQL table and stored position of `policy`'s run (rows in offset order for
/// the append table, which has no insertion order: its newest row of an order is then the
/// one a reader taking the latest record sees).
inline void take_pg_snapshot(policy_id policy, const std::string& conninfo, snapshot& s) {
  pg_client c(conninfo);
  const std::string schema = pg_schema_of(policy);
  if (c.has_table(schema, "orders_flat")) {
    const auto r =
        c.exec("SELECT order_id, customer_id, total_cents, event_seq, source_offset FROM " +
               schema + ".orders_flat ORDER BY source_offset, order_id");
    for (int i = 0; i < r.rows(); ++i)
      s.rows.push_back(
          table_row{order_event{r.integer(i, 0), r.integer(i, 1), r.integer(i, 2), r.integer(i, 3)},
                    r.integer(i, 4)});
  }
  if ((policy == policy_id::at_most_once_auto || policy == policy_id::transactional) &&
      c.has_table(schema, "commit_order_positions")) {
    const auto r =
        c.exec("SELECT position FROM " + schema + ".commit_order_positions WHERE stream = '" +
               std::string(stream_name) + "' AND \"partition\" = 0");
    if (r.rows() == 1 && !r.is_null(0, 0))
      s.stored = co::position{r.integer(0, 0)};
  }
}

/// Reads the table and the stored position of `policy`'s run. `kafka_committed`, when given,
/// reads the position of a policy that keeps it in Kafka's committed offsets (a run on the
/// Kafka topic, see position_in_kafka).
template <class Config>
snapshot take_snapshot(policy_id policy, const Config& config,
                       const std::filesystem::path& database,
                       const std::filesystem::path& position_file,
                       const std::function<std::optional<co::position>()>& kafka_committed = {}) {
  snapshot s;
  if (config.sink == sink_kind::postgres) {
    take_pg_snapshot(policy, config.pg_conninfo, s);
  } else if (std::filesystem::exists(database)) {
    auto db = sq::connection::open<sq::wal_full>(database);
    auto exists =
        db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1");
    const auto has_table = [&](std::string_view name) {
      sq::reset_on_exit reset(exists);
      exists.bind(1, name);
      return exists.step() && exists.column_int64(0) == 1;
    };
    if (has_table("orders_flat")) {
      auto q = db.prepare(
          "SELECT order_id, customer_id, total_cents, event_seq, source_offset FROM orders_flat "
          "ORDER BY rowid");
      while (q.step())
        s.rows.push_back(table_row{
            order_event{q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)},
            q.column_int64(4)});
    }
    if (policy == policy_id::transactional ||
        (policy == policy_id::at_most_once_auto && !kafka_committed)) {
      if (has_table("commit_order_positions")) {
        auto q = db.prepare("SELECT position FROM commit_order_positions WHERE stream = ?1");
        q.bind(1, stream_name);
        if (q.step() && !q.column_is_null(0))
          s.stored = co::position{q.column_int64(0)};
      }
    }
  }
  if (kafka_committed && position_in_kafka(policy))
    s.stored = kafka_committed();
  else if (policy == policy_id::at_most_once || policy == policy_id::at_least_once)
    s.stored = co::file::position_store(position_file).load();
  return s;
}

/// An output topic's messages (in offset order) as the rows of an append table: each carries
/// the offset of the record of `log` it is the effect of, found by its order and sequence
/// (-1: no record of the log is that event, a mismatch).
inline snapshot topic_snapshot(const std::vector<order_event>& log,
                               const std::vector<order_event>& messages,
                               std::optional<co::position> stored) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> offset_of;
  for (std::size_t i = 0; i < log.size(); ++i)
    offset_of.emplace(std::pair{log[i].order_id, log[i].event_seq}, static_cast<std::int64_t>(i));
  snapshot s;
  s.stored = stored;
  for (const order_event& m : messages) {
    const auto it = offset_of.find({m.order_id, m.event_seq});
    s.rows.push_back(table_row{m, it != offset_of.end() ? it->second : -1});
  }
  return s;
}

/// How many orders a reader of the whole topic sees go back to an older event at least once:
/// a message of the order after a message of a later event of it (a replayed run).
inline std::int64_t count_orders_going_back(const snapshot& topic) {
  std::map<std::int64_t, std::int64_t> newest;
  std::map<std::int64_t, bool> went_back;
  for (const auto& r : topic.rows) {
    const auto [it, first] = newest.try_emplace(r.event.order_id, r.event.event_seq);
    if (!first && r.event.event_seq < it->second)
      went_back[r.event.order_id] = true;
    it->second = std::max(it->second, r.event.event_seq);
  }
  return static_cast<std::int64_t>(went_back.size());
}

/// How many orders show an older event in `now` than they showed in `before` (or vanished).
inline std::int64_t count_regressions(const snapshot& before, const snapshot& now) {
  const auto old_seq = before.visible_seq();
  const auto new_seq = now.visible_seq();
  std::int64_t regressed = 0;
  for (const auto& [order, seq] : old_seq) {
    const auto it = new_seq.find(order);
    if (it == new_seq.end() || it->second < seq)
      ++regressed;
  }
  return regressed;
}

/// Append table only: records below the stored position that have no row. The next child
/// starts at the stored position, so these are lost for good.
inline std::int64_t count_skipped(const snapshot& s) {
  if (!s.stored)
    return 0;
  std::vector<bool> present(static_cast<std::size_t>(s.stored->value()), false);
  for (const auto& r : s.rows)
    if (r.source_offset >= 0 && r.source_offset < s.stored->value())
      present[static_cast<std::size_t>(r.source_offset)] = true;
  std::int64_t missing = 0;
  for (bool p : present)
    missing += p ? 0 : 1;
  return missing;
}

/// The final table against the log.
struct reconciliation {
  std::int64_t rows_expected = 0;
  std::int64_t rows_lost = 0;        ///< expected rows absent, or showing an older event
  std::int64_t duplicate_rows = 0;   ///< rows beyond the one expected for their record/order
  std::int64_t mismatched_rows = 0;  ///< rows that are no event of the log at their offset
  /// An output topic only: orders its reader sees go back to an older event.
  std::int64_t regressed_rows = 0;
};

inline reconciliation reconcile(policy_id policy, const std::vector<order_event>& log,
                                const snapshot& final_state, sink_kind sink = sink_kind::sqlite) {
  reconciliation r;
  const auto n = static_cast<std::int64_t>(log.size());
  const auto matches_log = [&](const table_row& row) {
    return row.source_offset >= 0 && row.source_offset < n &&
           log[static_cast<std::size_t>(row.source_offset)] == row.event;
  };
  for (const auto& row : final_state.rows)
    r.mismatched_rows += matches_log(row) ? 0 : 1;

  if (sink == sink_kind::kafka)
    r.regressed_rows = count_orders_going_back(final_state);
  if (appends(policy, sink)) {
    // One row per record: a record with no row is lost, a record with two has a duplicate.
    r.rows_expected = n;
    std::vector<std::int64_t> copies(log.size(), 0);
    for (const auto& row : final_state.rows)
      if (matches_log(row))
        ++copies[static_cast<std::size_t>(row.source_offset)];
    for (std::int64_t c : copies) {
      r.rows_lost += c == 0 ? 1 : 0;
      r.duplicate_rows += c > 1 ? c - 1 : 0;
    }
    return r;
  }

  // One row per order, showing the order's last event.
  std::map<std::int64_t, std::int64_t> last_offset;
  for (std::int64_t i = 0; i < n; ++i)
    last_offset[log[static_cast<std::size_t>(i)].order_id] = i;
  r.rows_expected = static_cast<std::int64_t>(last_offset.size());
  std::map<std::int64_t, std::vector<const table_row*>> by_order;
  for (const auto& row : final_state.rows)
    by_order[row.event.order_id].push_back(&row);
  for (const auto& [order, offset] : last_offset) {
    const auto it = by_order.find(order);
    if (it == by_order.end()) {
      ++r.rows_lost;
      continue;
    }
    r.duplicate_rows += static_cast<std::int64_t>(it->second.size()) - 1;
    const table_row& row = *it->second.back();
    if (row.event.event_seq < log[static_cast<std::size_t>(offset)].event_seq)
      ++r.rows_lost;  // the order's latest update never landed
  }
  for (const auto& [order, rows] : by_order)
    if (!last_offset.contains(order))
      r.mismatched_rows += static_cast<std::int64_t>(rows.size());
  return r;
}

}  // namespace crash_lab
