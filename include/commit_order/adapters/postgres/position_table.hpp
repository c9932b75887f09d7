// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/position_table.hpp — the rows that hold a stream's positions,
// one per partition with its owner's epoch, and the row that holds what a stream's owners
// share (its era and partition count).
//
//   CREATE TABLE commit_order_positions (stream TEXT, topic TEXT, "partition" INTEGER,
//       position BIGINT,                        -- the next offset to read; NULL: claimed only
//       owner_epoch BIGINT NOT NULL DEFAULT 0,  -- the epoch of the consumer that owns it
//       bound_to TEXT,                          -- the data table and source it vouches for
//       fingerprint BIGINT,                     -- of the record before fingerprint_position
//       fingerprint_position BIGINT,            -- the position the fingerprint was stored with
//       PRIMARY KEY (stream, topic, "partition"))
//   CREATE TABLE commit_order_streams (stream TEXT, topic TEXT,
//       era BIGINT NOT NULL DEFAULT 0,          -- raised by an operator only (bump_era)
//       partition_count INTEGER,                -- recorded at the first claim
//       PRIMARY KEY (stream, topic))
//
// Every statement is conditional on ownership where it writes a position: a claim raises the
// epoch or changes nothing (and the claimer is fenced), a store changes the row only while it
// is owned at the writer's epoch. The statements are prepared once per connection.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "commit_order/adapters/detail/position_protocol.hpp"
#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::postgres {

/// Where a stream's positions live: the stream (the consumer's name), the topic it reads, and
/// the tables.
struct position_location final {
  std::string stream = "default";
  std::string topic = "default";
  std::string position_table = "commit_order_positions";
  std::string stream_table = "commit_order_streams";
};

namespace detail {

/// How PostgreSQL spells the shared position protocol (adapters/detail/position_protocol.hpp).
struct dialect final {
  static constexpr char parameter = '$';
  static constexpr std::string_view int64 = "BIGINT";
  static constexpr std::string_view same = "IS NOT DISTINCT FROM";
  static constexpr std::string_view boolean = "::boolean";
};
using position_statements = adapters::detail::position_statements<dialect>;

inline std::string require_identifier(const std::string& name, std::string_view what) {
  if (!is_identifier(name))
    throw std::invalid_argument(concat("commit_order::postgres: the ", what, " '", name,
                                       "' is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)"));
  return quote_identifier(name);
}

/// The error for a position row bound to `held`, not to `mine`: with the operator's statement
/// that unbinds it, in the position table `table` of `schema` (empty: the search path's).
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_bound_elsewhere(
    partition_id k, const std::string& schema, const std::string& table, const std::string& stream,
    const std::string& topic, const std::string& held, const std::string& mine) {
  const std::string where = schema.empty()
                                ? quote_identifier(table)
                                : concat(quote_identifier(schema), ".", quote_identifier(table));
  adapters::detail::throw_bound_elsewhere(k, where, stream, topic, held, mine);
}

/// The statements on the position and stream tables, by name.
struct position_sql final {
  static constexpr const char* load = "co_position_load";
  static constexpr const char* claim = "co_position_claim";
  static constexpr const char* claim_next = "co_position_claim_next";
  static constexpr const char* fence = "co_position_fence";
  static constexpr const char* store = "co_position_store";
  static constexpr const char* store_bound = "co_position_store_bound";
  static constexpr const char* reserve = "co_position_reserve";
  static constexpr const char* count = "co_stream_count";
  static constexpr const char* read_stream = "co_stream_read";
  static constexpr const char* bump_era = "co_stream_bump_era";
  static constexpr const char* accept_count = "co_stream_accept_count";

  /// Creates the tables if asked, and prepares every statement on `db`.
  static void prepare(connection& db, const position_location& where, bool create) {
    const std::string p = require_identifier(where.position_table, "position table name");
    const std::string s = require_identifier(where.stream_table, "stream table name");
    if (create) {
      // Two consumers creating the same table at once can collide in the catalog (a unique
      // violation on pg_type): the advisory lock makes the second wait for the first.
      db.exec(concat("BEGIN; SELECT pg_advisory_xact_lock(7206164131); ",
                     position_statements::create_positions(p),
                     // A table written before positions were bound to their data table, or
                     // before they kept the fingerprint of the record they follow.
                     "; ALTER TABLE ", p,
                     " ADD COLUMN IF NOT EXISTS bound_to TEXT, ADD COLUMN IF NOT EXISTS"
                     " fingerprint BIGINT, ADD COLUMN IF NOT EXISTS fingerprint_position BIGINT; ",
                     position_statements::create_streams(s), "; COMMIT"));
    } else {
      require_column(db, p, "bound_to", "TEXT",
                     "it was written before positions were bound to their table");
      for (const char* column : {"fingerprint", "fingerprint_position"})
        require_column(db, p, column, "BIGINT",
                       "it was written before positions kept the fingerprint of the record they "
                       "follow");
    }
    // The shared protocol's statements, which say what each changes and returns. A claim binds
    // an unbound row to the claimer's data table and returns the binding the row holds after
    // it: the sink refuses another table's (its transaction is rolled back), it never takes it
    // over.
    db.prepare(load, position_statements::load(p));
    db.prepare(claim, position_statements::claim(p));
    db.prepare(claim_next, position_statements::claim_next(p));
    // Locks the position rows of the partitions a transaction stores, in ascending order,
    // before anything else it writes: a concurrent claim waits for it (or it for the claim),
    // and the epochs it reads are the ones its COMMIT will be judged by.
    db.prepare(fence, concat("SELECT \"partition\", owner_epoch FROM ", p,
                             " WHERE stream = $1 AND topic = $2 AND \"partition\" ="
                             " ANY($3::integer[]) ORDER BY \"partition\" FOR UPDATE"));
    // Changes a row only while it is owned at the writer's epoch; RETURNING names the rows it
    // changed, so a missing partition is a fenced writer. A position is stored with the
    // fingerprint of the record it follows (or none), and the fingerprint with the position it
    // belongs to: a writer that moves the position and knows nothing of fingerprints (a
    // position store, an earlier version of this library) leaves one that no longer matches.
    db.prepare(store,
               concat("INSERT INTO ", p,
                      " AS t (stream, topic, \"partition\", position, owner_epoch, fingerprint,"
                      " fingerprint_position) SELECT $1, $2, u.k, u.p, u.e, u.f, u.p FROM"
                      " unnest($3::integer[], $4::bigint[], $5::bigint[], $6::bigint[])"
                      " AS u(k, p, e, f) ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET"
                      " position = excluded.position, fingerprint = excluded.fingerprint,"
                      " fingerprint_position = excluded.fingerprint_position"
                      " WHERE t.owner_epoch = excluded.owner_epoch RETURNING \"partition\""));
    db.prepare(count, position_statements::record_partition_count(s));
    db.prepare(read_stream, position_statements::read_stream(s));
    db.prepare(bump_era, position_statements::bump_era(s));
    db.prepare(accept_count, position_statements::accept_partition_count(s));
  }

  // Refuses a position table of an earlier layout that lacks `column` (create_tables is off, so
  // the sink does not change it): says what to run.
  static void require_column(connection& db, const std::string& p, std::string_view column,
                             std::string_view type, std::string_view why) {
    const result r = db.exec(concat("SELECT to_regclass('", p,
                                    "') IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_attribute"
                                    " WHERE attrelid = to_regclass('",
                                    p, "') AND attname = '", column, "' AND NOT attisdropped)"));
    if (r.rows() == 1 && r.text(0, 0) == "t")
      throw commit_order::error(concat("commit_order::postgres: the position table ", p,
                                       " has no column ", column, " (", why,
                                       ", and create_tables is off); add it with: ALTER TABLE ", p,
                                       " ADD COLUMN ", column, " ", type));
  }

  /// Prepares a position store's write and its reservation of a row on `db` (after prepare).
  static void prepare_store(connection& db, const position_location& where) {
    const std::string p = require_identifier(where.position_table, "position table name");
    db.prepare(store_bound, position_statements::store_bound(p));
    db.prepare(reserve, position_statements::reserve(p));
  }
};

}  // namespace detail

}  // namespace commit_order::postgres
