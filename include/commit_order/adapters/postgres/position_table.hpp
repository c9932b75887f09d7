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
  throw position_bound_elsewhere(
      k, stream, topic, held, mine,
      concat("UPDATE ", where, " SET bound_to = NULL WHERE stream = ", quote_literal(stream),
             " AND topic = ", quote_literal(topic), " AND bound_to = ", quote_literal(held), ";"));
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
  static constexpr const char* era = "co_stream_era";
  static constexpr const char* bump_era = "co_stream_bump_era";
  static constexpr const char* accept_count = "co_stream_accept_count";
  static constexpr const char* read_count = "co_stream_read_count";

  /// A claim's fingerprint: the one stored with the position the row holds, or none.
  static constexpr const char* fingerprint_returned =
      "CASE WHEN fingerprint_position = position THEN fingerprint END";

  /// Creates the tables if asked, and prepares every statement on `db`.
  static void prepare(connection& db, const position_location& where, bool create) {
    const std::string p = require_identifier(where.position_table, "position table name");
    const std::string s = require_identifier(where.stream_table, "stream table name");
    if (create) {
      // Two consumers creating the same table at once can collide in the catalog (a unique
      // violation on pg_type): the advisory lock makes the second wait for the first.
      db.exec(
          concat("BEGIN; SELECT pg_advisory_xact_lock(7206164131);"
                 " CREATE TABLE IF NOT EXISTS ",
                 p,
                 " (stream TEXT NOT NULL, topic TEXT NOT NULL, \"partition\" INTEGER NOT NULL,"
                 " position BIGINT, owner_epoch BIGINT NOT NULL DEFAULT 0, bound_to TEXT,"
                 " fingerprint BIGINT, fingerprint_position BIGINT,"
                 " PRIMARY KEY (stream, topic, \"partition\"));"
                 // A table written before positions were bound to their data table, or before
                 // they kept the fingerprint of the record they follow.
                 " ALTER TABLE ",
                 p,
                 " ADD COLUMN IF NOT EXISTS bound_to TEXT, ADD COLUMN IF NOT EXISTS fingerprint"
                 " BIGINT, ADD COLUMN IF NOT EXISTS fingerprint_position BIGINT;"
                 " CREATE TABLE IF NOT EXISTS ",
                 s,
                 " (stream TEXT NOT NULL, topic TEXT NOT NULL, era BIGINT NOT NULL DEFAULT 0,"
                 " partition_count INTEGER, PRIMARY KEY (stream, topic)); COMMIT"));
    } else {
      require_column(db, p, "bound_to", "TEXT",
                     "it was written before positions were bound to their table");
      for (const char* column : {"fingerprint", "fingerprint_position"})
        require_column(db, p, column, "BIGINT",
                       "it was written before positions kept the fingerprint of the record they "
                       "follow");
    }
    db.prepare(load,
               concat("SELECT position, owner_epoch, bound_to, ", fingerprint_returned, " FROM ", p,
                      " WHERE stream = $1 AND topic = $2 AND \"partition\" = $3"));
    // A claim binds an unbound row to the claimer's data table ($5, $4; NULL for a claimer
    // without one) and returns the binding the row holds after it: the sink refuses another
    // table's (its transaction is rolled back), it never takes it over.
    db.prepare(claim, concat("INSERT INTO ", p,
                             " AS t (stream, topic, \"partition\", position, owner_epoch, bound_to)"
                             " VALUES ($1, $2, $3, NULL, $4, $5) ON CONFLICT (stream, topic,"
                             " \"partition\") DO UPDATE SET owner_epoch = excluded.owner_epoch,"
                             " bound_to = COALESCE(t.bound_to, excluded.bound_to)"
                             " WHERE t.owner_epoch <= excluded.owner_epoch"
                             " RETURNING position, bound_to, ",
                             fingerprint_returned));
    db.prepare(claim_next,
               concat("INSERT INTO ", p,
                      " AS t (stream, topic, \"partition\", position, owner_epoch, bound_to)"
                      " VALUES ($1, $2, $3, NULL, 1, $4) ON CONFLICT (stream, topic,"
                      " \"partition\") DO UPDATE SET owner_epoch = t.owner_epoch + 1,"
                      " bound_to = COALESCE(t.bound_to, excluded.bound_to)"
                      " RETURNING owner_epoch, position, bound_to, ",
                      fingerprint_returned));
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
    db.prepare(count, concat("INSERT INTO ", s,
                             " AS t (stream, topic, era, partition_count) VALUES ($1, $2, 0, $3)"
                             " ON CONFLICT (stream, topic) DO UPDATE SET partition_count ="
                             " CASE WHEN $4::boolean OR t.partition_count IS NULL"
                             " THEN excluded.partition_count ELSE t.partition_count END"
                             " RETURNING partition_count"));
    db.prepare(era, concat("SELECT era FROM ", s, " WHERE stream = $1 AND topic = $2"));
    db.prepare(bump_era, concat("INSERT INTO ", s,
                                " AS t (stream, topic, era, partition_count) VALUES ($1, $2, 1,"
                                " NULL) ON CONFLICT (stream, topic) DO UPDATE SET era = t.era + 1"
                                " RETURNING era"));
    db.prepare(accept_count, concat("INSERT INTO ", s,
                                    " AS t (stream, topic, era, partition_count) VALUES ($1, $2, 0,"
                                    " $3::integer) ON CONFLICT (stream, topic) DO UPDATE SET"
                                    " partition_count = excluded.partition_count"));
    db.prepare(read_count,
               concat("SELECT partition_count FROM ", s, " WHERE stream = $1 AND topic = $2"));
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

  /// Prepares a position store's write on `db` (after prepare): one partition's row, bound to
  /// what the store vouches for ($5; NULL when unbound). An unbound row is bound; a row bound
  /// to anything else is not changed (NULL matches only NULL), nor one owned at another epoch.
  static void prepare_store(connection& db, const position_location& where) {
    const std::string p = require_identifier(where.position_table, "position table name");
    db.prepare(store_bound,
               concat("INSERT INTO ", p,
                      " AS t (stream, topic, \"partition\", position, owner_epoch, bound_to,"
                      " fingerprint, fingerprint_position) VALUES ($1, $2, $3, $4, 0, $5, $6, $4)"
                      " ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET position ="
                      " excluded.position, bound_to = excluded.bound_to, fingerprint ="
                      " excluded.fingerprint, fingerprint_position = excluded.fingerprint_position"
                      " WHERE t.owner_epoch = excluded.owner_epoch AND (t.bound_to IS NULL OR"
                      " t.bound_to IS NOT DISTINCT FROM excluded.bound_to) RETURNING 1"));
    // A bound store reserves its row when it first reads it: a second consumer that starts at
    // the same time is refused at its own read, before it writes a row (a reservation holds no
    // position, and changes no row that exists).
    db.prepare(reserve,
               concat("INSERT INTO ", p,
                      " (stream, topic, \"partition\", position, owner_epoch, bound_to)"
                      " VALUES ($1, $2, $3, NULL, 0, $4) ON CONFLICT (stream, topic, \"partition\")"
                      " DO NOTHING"));
  }
};

}  // namespace detail

}  // namespace commit_order::postgres
