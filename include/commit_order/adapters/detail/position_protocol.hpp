// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/detail/position_protocol.hpp — the position, claim and fencing protocol
// of the SQL adapters, written once over a small SQL dialect. Not a public header: users reach
// it through sqlite:: and postgres::.
//
// A stream's positions are rows of a position table, one per (stream, topic, partition), each
// with the epoch of the partition's owner and what the position vouches for (bound_to: the data
// table, and the source when the pipeline names it); what the owners share (an era, the
// partition count recorded at the first claim) is a row of a stream table. Both adapters keep
// the same tables and judge the same way:
//   - a claim raises the row's epoch or changes nothing (a newer owner holds it: fenced);
//   - a write of a position changes the row only while it is owned at the writer's epoch, and
//     an owner's write (epoch above 0) never recreates a row that was deleted under it;
//   - a claim binds an unbound row and refuses a row bound to something else, never takes it
//     over; a position store refuses any binding but exactly its own;
//   - a fingerprint is returned only with the position it was stored with.
// What differs between the databases is spelling (how a parameter is written, the 64-bit column
// type, null-safe equality, a boolean parameter), which a dialect says:
//   struct Dialect {
//     static constexpr char parameter;              // '?' (?1, ?2, ...) or '$' ($1, $2, ...)
//     static constexpr std::string_view int64;      // the column type of a 64-bit integer
//     static constexpr std::string_view same;       // null-safe equality of two values
//     static constexpr std::string_view boolean;    // appended to a boolean parameter
//   };
// and how a statement is run (SQLite binds and steps a prepared statement; PostgreSQL pipelines
// prepared statements, and stores a transaction's partitions in one statement after locking
// their rows, which is its own: postgres/position_table.hpp).
//
// Every statement takes the stream, the topic and the partition as parameters 1, 2 and 3, so an
// adapter binds those once; the parameters after them are listed with each statement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "commit_order/adapters/detail/table_description.hpp"
#include "commit_order/detail/concat.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::adapters::detail {

using commit_order::detail::concat;

template <class Dialect>
struct position_statements final {
  /// Parameter `n` as the dialect writes it.
  static std::string p(int n) {
    std::string out(1, Dialect::parameter);
    out += static_cast<char>('0' + n);  // at most 7 parameters
    return out;
  }

  // ---- the tables ------------------------------------------------------------------------

  /// `positions` and `streams` are quoted identifiers (checked by the adapter).
  static std::string create_positions(std::string_view positions) {
    const auto i = Dialect::int64;
    return concat("CREATE TABLE IF NOT EXISTS ", positions,
                  " (stream TEXT NOT NULL, topic TEXT NOT NULL, \"partition\" INTEGER NOT NULL,"
                  " position ",
                  i, ", owner_epoch ", i, " NOT NULL DEFAULT 0, bound_to TEXT, fingerprint ", i,
                  ", fingerprint_position ", i, ", PRIMARY KEY (stream, topic, \"partition\"))");
  }
  static std::string create_streams(std::string_view streams) {
    return concat("CREATE TABLE IF NOT EXISTS ", streams,
                  " (stream TEXT NOT NULL, topic TEXT NOT NULL, era ", Dialect::int64,
                  " NOT NULL DEFAULT 0, partition_count INTEGER, PRIMARY KEY (stream, topic))");
  }

  // ---- the position rows -----------------------------------------------------------------

  /// A claim's or a load's fingerprint: the one stored with the position the row holds, or none
  /// (a writer that moved the position and knows nothing of fingerprints left one that no longer
  /// matches).
  static constexpr std::string_view fingerprint_returned =
      "CASE WHEN fingerprint_position = position THEN fingerprint END";

  /// Returns position, owner_epoch, bound_to, fingerprint.
  static std::string load(std::string_view positions) {
    return concat("SELECT position, owner_epoch, bound_to, ", fingerprint_returned, " FROM ",
                  positions, " WHERE stream = ", p(1), " AND topic = ", p(2),
                  " AND \"partition\" = ", p(3));
  }

  /// 4: the claimer's epoch, 5: its binding (NULL: none). Raises the epoch, binds an unbound
  /// row, and returns position, bound_to, fingerprint -- or nothing when a newer owner holds the
  /// row. One statement, so no other claim can come between reading the epoch and raising it.
  static std::string claim(std::string_view positions) {
    return concat("INSERT INTO ", positions,
                  " AS t (stream, topic, \"partition\", position, owner_epoch, bound_to) VALUES (",
                  p(1), ", ", p(2), ", ", p(3), ", NULL, ", p(4), ", ", p(5),
                  ") ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET owner_epoch ="
                  " excluded.owner_epoch, bound_to = COALESCE(t.bound_to, excluded.bound_to)"
                  " WHERE t.owner_epoch <= excluded.owner_epoch RETURNING position, bound_to, ",
                  fingerprint_returned);
  }

  /// 4: the claimer's binding (NULL: none). One above whatever the row holds (1 for a new row);
  /// returns owner_epoch, position, bound_to, fingerprint.
  static std::string claim_next(std::string_view positions) {
    return concat("INSERT INTO ", positions,
                  " AS t (stream, topic, \"partition\", position, owner_epoch, bound_to) VALUES (",
                  p(1), ", ", p(2), ", ", p(3), ", NULL, 1, ", p(4),
                  ") ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET owner_epoch ="
                  " t.owner_epoch + 1, bound_to = COALESCE(t.bound_to, excluded.bound_to)"
                  " RETURNING owner_epoch, position, bound_to, ",
                  fingerprint_returned);
  }

  /// One partition's write by a writer that claimed nothing (epoch 0, parameter 5): its first
  /// write makes the row. 4: the position, 6: the fingerprint (NULL: none). Changes one row, or
  /// none when another owner holds it.
  static std::string store_unclaimed(std::string_view positions) {
    return concat("INSERT INTO ", positions,
                  " AS t (stream, topic, \"partition\", position, owner_epoch, fingerprint,"
                  " fingerprint_position) VALUES (",
                  p(1), ", ", p(2), ", ", p(3), ", ", p(4), ", ", p(5), ", ", p(6), ", ", p(4),
                  ") ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET position ="
                  " excluded.position, fingerprint = excluded.fingerprint, fingerprint_position ="
                  " excluded.fingerprint_position WHERE t.owner_epoch = excluded.owner_epoch");
  }

  /// One partition's write by its owner (epoch 5, above 0): it only updates -- the claim made
  /// the row, so a missing row was deleted under the owner, and recreating it would write a
  /// position nobody claimed. 4: the position, 6: the fingerprint.
  static std::string store_claimed(std::string_view positions) {
    return concat("UPDATE ", positions, " SET position = ", p(4), ", fingerprint = ", p(6),
                  ", fingerprint_position = ", p(4), " WHERE stream = ", p(1),
                  " AND topic = ", p(2), " AND \"partition\" = ", p(3),
                  " AND owner_epoch = ", p(5));
  }

  /// A position store's write (no claim comes before it): 4: the position, 5: the store's epoch,
  /// 6: what the store vouches for (NULL: nothing), 7: the fingerprint. Binds an unbound row and
  /// changes no row bound to anything else (NULL matches only NULL), nor one owned at another
  /// epoch.
  static std::string store_bound(std::string_view positions) {
    return concat("INSERT INTO ", positions,
                  " AS t (stream, topic, \"partition\", position, owner_epoch, bound_to,"
                  " fingerprint, fingerprint_position) VALUES (",
                  p(1), ", ", p(2), ", ", p(3), ", ", p(4), ", ", p(5), ", ", p(6), ", ", p(7),
                  ", ", p(4),
                  ") ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET position ="
                  " excluded.position, bound_to = excluded.bound_to, fingerprint ="
                  " excluded.fingerprint, fingerprint_position = excluded.fingerprint_position"
                  " WHERE t.owner_epoch = excluded.owner_epoch AND (t.bound_to IS NULL OR"
                  " t.bound_to ",
                  Dialect::same, " excluded.bound_to)");
  }

  /// 4: what a bound store vouches for. A bound store reserves its row when it first reads it:
  /// a second consumer that starts at the same time is refused at its own read, before it
  /// writes a row. A reservation holds no position, and changes no row that exists.
  static std::string reserve(std::string_view positions) {
    return concat("INSERT INTO ", positions,
                  " (stream, topic, \"partition\", position, owner_epoch, bound_to) VALUES (", p(1),
                  ", ", p(2), ", ", p(3), ", NULL, 0, ", p(4),
                  ") ON CONFLICT (stream, topic, \"partition\") DO NOTHING");
  }

  // ---- the stream row (parameters 1 and 2 only) ------------------------------------------

  /// Returns era, partition_count.
  static std::string read_stream(std::string_view streams) {
    return concat("SELECT era, partition_count FROM ", streams, " WHERE stream = ", p(1),
                  " AND topic = ", p(2));
  }

  /// 3: the count a claim sees, 4: true to record it whatever is recorded (a version-guarded
  /// sink, whose guard does not depend on partitions). Records it when none is; returns the
  /// count recorded after it, which a claim compares with its own (record_partition_count).
  static std::string record_partition_count(std::string_view streams) {
    return concat("INSERT INTO ", streams, " AS t (stream, topic, era, partition_count) VALUES (",
                  p(1), ", ", p(2), ", 0, ", p(3),
                  ") ON CONFLICT (stream, topic) DO UPDATE SET partition_count = CASE WHEN ", p(4),
                  Dialect::boolean,
                  " OR t.partition_count IS NULL THEN excluded.partition_count ELSE"
                  " t.partition_count END RETURNING partition_count");
  }

  /// 3: the count an operator accepts (NULL: the next claim records what it sees).
  static std::string accept_partition_count(std::string_view streams) {
    return concat("INSERT INTO ", streams, " AS t (stream, topic, era, partition_count) VALUES (",
                  p(1), ", ", p(2), ", 0, ", p(3),
                  ") ON CONFLICT (stream, topic) DO UPDATE SET partition_count ="
                  " excluded.partition_count");
  }

  /// Raises the era by one and returns it (the operator's act after a consumer group was
  /// deleted and recreated).
  static std::string bump_era(std::string_view streams) {
    return concat("INSERT INTO ", streams, " AS t (stream, topic, era, partition_count) VALUES (",
                  p(1), ", ", p(2),
                  ", 1, NULL) ON CONFLICT (stream, topic) DO UPDATE SET era = t.era + 1"
                  " RETURNING era");
  }
};

// ---- the judgments -----------------------------------------------------------------------

/// The statement an operator runs to release a position bound to `held` (printed in the error,
/// never run by the adapters): `where` is the quoted position table.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_bound_elsewhere(
    partition_id k, std::string_view where, std::string_view stream, std::string_view topic,
    std::string_view held, std::string_view mine) {
  throw position_bound_elsewhere(
      k, stream, topic, held, mine,
      concat("UPDATE ", where, " SET bound_to = NULL WHERE stream = ", quote_literal(stream),
             " AND topic = ", quote_literal(topic), " AND bound_to = ", quote_literal(held), ";"));
}

/// A claimer's judgment of the binding a claim returned: a claimer bound to `mine` accepts a row
/// left unbound (none) or bound to what binding_holds accepts, and refuses any other: the claim
/// is rolled back, the row is never taken over. A claimer bound to nothing (an operator's)
/// accepts any.
[[nodiscard]] inline bool claim_refused(std::optional<std::string_view> held,
                                        std::string_view mine) {
  return !mine.empty() && held && !binding_holds(*held, mine);
}

/// A position store's judgment of the row it read: a bound store accepts an unbound row (it
/// binds it at its next write) or exactly its own binding -- its write changes only such a row,
/// so a row it read and could not write would be fenced at every commit. An unbound store reads
/// any row (it has nothing to compare).
[[nodiscard]] inline bool store_read_refused(std::optional<std::string_view> held,
                                             std::string_view mine) {
  return !mine.empty() && held && *held != mine;
}

/// Why a position store's write changed no row, judged from the row read after it: true when the
/// row's binding is to blame -- the row is another consumer's (bound elsewhere), which is the
/// blame whatever its epoch, not a fencing, which says a newer copy of this consumer took over.
/// A store's write changes only a row bound to exactly what it vouches for or to nothing, so an
/// unbound store (`mine` empty) is refused by any binding; it can tell a binding from a fencing
/// only when the epoch is its own. `row_owner` is the epoch the row holds (none: there is no
/// row), `held` its binding (none: unbound).
[[nodiscard]] inline bool failed_write_bound_elsewhere(std::optional<epoch> row_owner,
                                                       std::optional<std::string_view> held,
                                                       std::string_view mine, epoch writer) {
  return row_owner && held && *held != mine && (!mine.empty() || *row_owner == writer);
}

/// A claim's judgment of the partition count record_partition_count left recorded.
inline void check_recorded_count(std::size_t recorded, std::size_t seen) {
  if (recorded != seen)
    throw partition_count_changed(recorded, seen);
}

/// A position store bound to nothing that kept the default stream vouches for nothing: a second
/// consumer of the database that kept the defaults too would share its position. `adapter` is
/// the message prefix ("commit_order::sqlite"), `kind` the database's name in the message,
/// `table` the position table, `remedy` what else the user may do.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_unbound_default(std::string_view adapter,
                                                                         std::string_view kind,
                                                                         std::string_view table,
                                                                         std::string_view remedy) {
  throw std::invalid_argument(
      concat(adapter,
             ": a position store with the default stream \"default\" vouches for nothing: the "
             "pipeline's sink names no table (a sink of your own, or a wrapper of a ",
             kind,
             " sink) and its source no identity, so a second consumer of this database that kept "
             "the defaults too would share its position in ",
             table, " -- name this consumer in store_options::stream", remedy));
}

/// A fingerprint as the tables keep it: the same 64 bits, signed.
[[nodiscard]] constexpr std::int64_t fingerprint_to_column(std::uint64_t f) noexcept {
  return static_cast<std::int64_t>(f);
}
[[nodiscard]] constexpr std::uint64_t fingerprint_from_column(std::int64_t f) noexcept {
  return static_cast<std::uint64_t>(f);
}

}  // namespace commit_order::adapters::detail
