// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/refused_row.hpp — a sink's unit of rows was refused together
// with a record's SQLSTATE (a constraint, a value the column cannot take): which record, if
// any, is to blame? The rows are applied again on their own, in probes that are rolled back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/adapters/postgres/text.hpp"
#include "commit_order/adapters/postgres/transaction.hpp"
#include "commit_order/adapters/postgres/unit_buffer.hpp"
#include "commit_order/errors.hpp"

namespace commit_order::postgres::detail {

/// Statements per round trip while looking for the row that failed.
inline constexpr std::size_t diagnosis_chunk = 256;

// The unit's rows were refused together with a record's SQLSTATE (`failure`): which record,
// if any, is to blame? Every row of the unit (what earlier round trips of this transaction
// sent too) is applied again, one statement each, in the order its record was applied, in
// transactions that are rolled back; constraints keep their declared timing.
// - The first statement refused is the first record that fails when the unit is applied in
//   offset order: commit() throws row_failed naming it (its record_error nested), and the
//   pipeline retries, dead-letters or stops on that record.
// - If none is refused, the failure is a deferred constraint's, checked when the unit ends.
//   A record is named only when the unit without it passes that check and the unit without
//   any other record does not: one entry whose counterpart is missing is named, the two
//   healthy halves of a pair never are (a unit of more than `diagnosis_chunk` rows is not
//   searched so: that costs a transaction per row).
// - Otherwise no record is to blame (no record is the one; or a conflict with a transaction
//   that has ended since): `unit_refused`, the position unmoved, nothing dead-lettered.
// Called once the transaction has failed (nothing of it is on the server): the probes are
// transactions of their own, each rolled back.
template <class D, class Mode>
[[noreturn]] void blame_refused_row(connection& db, const char* write_statement,
                                    const std::vector<typename unit_buffer<D, Mode>::row>& rows,
                                    const result& failure, std::uint64_t& round_trips) {
  using buffer = unit_buffer<D, Mode>;
  using columns = columns_of<typename D::keys, typename D::values>;
  constexpr std::size_t arrays_per_statement = buffer::arrays_per_statement;

  std::vector<array_builder> arrays(diagnosis_chunk * arrays_per_statement);
  std::vector<const char*> values(arrays.size());
  // Queues the rows [from, to) but `skip`, one statement each.
  const auto send_rows = [&](std::size_t from, std::size_t to, std::size_t skip) {
    for (std::size_t i = from, slot = 0; i < to; ++i) {
      if (i == skip)
        continue;
      array_builder* a = arrays.data() + slot * arrays_per_statement;
      for (std::size_t c = 0; c < arrays_per_statement; ++c)
        a[c].clear();
      buffer::add_to(a, rows[i]);
      for (std::size_t c = 0; c < arrays_per_statement; ++c)
        values[slot * arrays_per_statement + c] = a[c].finish();
      db.send_prepared(write_statement, static_cast<int>(arrays_per_statement),
                       values.data() + slot * arrays_per_statement);
      ++slot;
    }
  };
  // Runs what is queued; the index of the first statement refused, if any.
  const auto first_refused = [&](std::string_view doing) -> std::optional<std::size_t> {
    ++round_trips;
    db.run();
    std::vector<result>& results = db.results();
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].ok())
        continue;
      if (!is_record_failure(results[i].sqlstate())) {
        const result refused = std::move(results[i]);
        roll_back(db);
        db.fail(refused, doing);
      }
      return i;
    }
    return std::nullopt;
  };
  const auto blame = [&](std::size_t i, std::string_view why, std::string_view sqlstate) {
    const auto& r = rows[i];
    try {
      throw record_error(sqlstate, concat("the row of ", columns::key_text(r.value), ": ", why));
    } catch (...) {
      std::throw_with_nested(row_failed(r.k, r.o, std::string(why)));
    }
  };
  try {
    db.ensure();
    db.exec("BEGIN");
    for (std::size_t from = 0; from < rows.size(); from += diagnosis_chunk) {
      const std::size_t to = std::min(rows.size(), from + diagnosis_chunk);
      send_rows(from, to, to);
      if (const auto at = first_refused("applying the unit's rows one by one")) {
        const result refused = std::move(db.results()[*at]);
        roll_back(db);
        blame(from + *at, refused.message(), refused.sqlstate());
      }
    }
    // Every row was taken alone: does the unit still fail its deferred constraints?
    db.send("SET CONSTRAINTS ALL IMMEDIATE");
    const bool deferred = first_refused("checking the unit's deferred constraints").has_value();
    roll_back(db);
    if (deferred && rows.size() <= diagnosis_chunk) {
      std::optional<std::size_t> culprit;
      for (std::size_t skip = 0; skip < rows.size(); ++skip) {
        db.send("BEGIN");
        send_rows(0, rows.size(), skip);
        db.send("SET CONSTRAINTS ALL IMMEDIATE");
        const bool refused = first_refused("checking the unit without one row").has_value();
        roll_back(db);
        if (refused)
          continue;
        if (culprit) {  // two records either of which the unit passes without: neither
          culprit.reset();
          break;
        }
        culprit = skip;
      }
      if (culprit)
        blame(*culprit,
              concat(failure.message(),
                     " (the unit passes its deferred constraints without this row "
                     "alone)"),
              failure.sqlstate());
    }
  } catch (...) {
    roll_back(db);
    throw;
  }
  throw unit_refused(failure.sqlstate(), failure.message());
}

}  // namespace commit_order::postgres::detail
