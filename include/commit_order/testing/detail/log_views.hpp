// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/detail/log_views.hpp — the transactional-log section of the crash matrix:
// a sink that is an output log written in transactions (kafka::transactional_sink, its model
// memory::transactional_log) is read through both of a log's readers at every moment the matrix
// reads the sink back.
//
// Its fixture's rows() is the read_committed view and uncommitted_rows() the read_uncommitted
// one, each in log order. At each moment:
//   * the read_committed view is a subsequence of the read_uncommitted one: one log, two readers;
//   * under a policy that never writes twice, it shows each partition's records in offset order,
//     each once (what a read_committed consumer downstream relies on);
//   * what only the read_uncommitted reader is shown are attempts that no commit carried: of the
//     unit a crash interrupted (the pipeline aborts it, as a restarted owner aborts its
//     predecessor's open transaction), at most one of each record, and each before the
//     record's committed copy (an attempt after it would be a zombie's write);
// and over the matrix, some crash must have left such an attempt: otherwise the sink erases an
// aborted unit (a table, not a log) or the fixture reads one view twice, and the section proved
// nothing about aborts.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "commit_order/testing/detail/scenario.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing::detail {

/// What the section counted over one policy's matrix.
struct log_totals {
  std::size_t views = 0;            ///< moments both views were read
  std::size_t attempts_shown = 0;   ///< after the crashes, messages only read_uncommitted shows
  std::size_t crashes_leaving = 0;  ///< crashes after which such a message was in the log
  std::size_t committed_shown = 0;  ///< messages the read_committed reader was shown
};

/// Both views of fixture F's log at one moment, against each other and against `may_abort`: the
/// records of which aborted attempts may be in the log, at most `max_attempts` of each (0: any
/// number, as record failures retried over several lives leave). Returns how many attempts it
/// found.
template <class F>
std::size_t check_log_views(world<F>& w, const stream<typename F::event_type>& s,
                            const std::string& when, bool once_in_order,
                            const std::vector<bool>& may_abort, log_totals& t, const fail_fn& fail,
                            int max_attempts = 1) {
  const auto committed = w.fixture.rows();
  const auto all = w.fixture.uncommitted_rows();
  const std::int64_t n = s.size();
  ++t.views;
  t.committed_shown += committed.size();

  if (once_in_order) {
    std::map<std::int32_t, std::int64_t> last;  ///< per partition, the record shown last
    for (const auto& r : committed) {
      if (!s.holds(r.source_partition, r.source_offset))
        continue;  // check_rows reports it
      const std::int64_t i = s.index(r.source_partition, r.source_offset);
      const auto [seen, first] = last.try_emplace(r.source_partition.value(), i);
      if (first)
        continue;
      if (i <= seen->second)
        fail(when + ": the read_committed view shows " + s.name(i) + " after " +
             s.name(seen->second) +
             ": a read_committed consumer would be given a record again, or out of order");
      else
        seen->second = i;
    }
  }

  auto same = [](const auto& a, const auto& b) {
    return a.source_partition == b.source_partition && a.source_offset == b.source_offset &&
           a.key == b.key && a.row == b.row;
  };
  auto not_one_log = [&](const auto& r) {
    fail(when + ": the read_committed view shows partition " +
         std::to_string(r.source_partition.value()) + " offset " +
         std::to_string(r.source_offset.value()) +
         " where the read_uncommitted view does not: the two readers are not shown one log");
  };
  auto carry_offsets = [](const auto& rows) {
    return std::all_of(rows.begin(), rows.end(),
                       [](const auto& r) { return r.log_offset.has_value(); });
  };
  std::vector<bool> committed_at(all.size(), false);
  if (carry_offsets(committed) && carry_offsets(all)) {
    // Exactly, by log offset: each committed message is the one at its offset.
    std::map<std::int64_t, std::size_t> where;
    for (std::size_t at = 0; at < all.size(); ++at)
      where.emplace(*all[at].log_offset, at);
    for (const auto& r : committed) {
      const auto it = where.find(*r.log_offset);
      if (it == where.end() || !same(all[it->second], r))
        not_one_log(r);
      else
        committed_at[it->second] = true;
    }
  } else {
    // By content alone, from the end: each committed message at the latest place it can be
    // (an aborted attempt and its redo look alike). An attempt after its record's committed
    // copy is then seen only where another committed message lies between them: a fixture
    // that gives log offsets is checked exactly.
    std::size_t unmatched = committed.size();
    for (std::size_t at = all.size(); at-- > 0 && unmatched > 0;) {
      if (same(all[at], committed[unmatched - 1])) {
        committed_at[at] = true;
        --unmatched;
      }
    }
    if (unmatched != 0)
      not_one_log(committed[unmatched - 1]);
  }
  std::vector<int> attempts(static_cast<std::size_t>(n), 0);
  std::vector<bool> committed_before(static_cast<std::size_t>(n), false);
  std::size_t found = 0;
  for (std::size_t at = 0; at < all.size(); ++at) {
    const auto& r = all[at];
    if (!s.holds(r.source_partition, r.source_offset)) {
      if (!committed_at[at])  // check_rows reports a committed one
        fail(when + ": the read_uncommitted view shows a message of partition " +
             std::to_string(r.source_partition.value()) + " offset " +
             std::to_string(r.source_offset.value()) + ", which is no record of the log");
      continue;
    }
    const std::int64_t i = s.index(r.source_partition, r.source_offset);
    const auto k = static_cast<std::size_t>(i);
    if (committed_at[at]) {
      committed_before[k] = true;
      continue;
    }
    ++found;
    ++attempts[k];
    if (committed_before[k])
      fail(when + ": the read_uncommitted view shows an attempt of " + s.name(i) +
           " after the record's committed copy: something wrote it after the owner whose "
           "transaction committed it (a zombie the next owner did not fence)");
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (attempts[k] == 0)
      continue;
    if (!may_abort[k])
      fail(when + ": the read_uncommitted view shows " + std::to_string(attempts[k]) +
           " uncommitted attempt(s) of " + s.name(i) +
           ", which is not a record of a unit that a crash interrupted");
    else if (max_attempts != 0 && attempts[k] > max_attempts)
      fail(when + ": the read_uncommitted view shows " + std::to_string(attempts[k]) +
           " uncommitted attempts of " + s.name(i) + ", one crash aborts at most one");
  }
  return found;
}

/// The section's verdict over one policy's matrix, in its own entry of the report.
inline void close_log_section(check_report& c, const log_totals& t, std::size_t crashes) {
  if (crashes != 0 && t.crashes_leaving == 0)
    c.fail(
        "no crash left an aborted attempt for a read_uncommitted reader: the sink takes an "
        "aborted unit's messages out of the log (a table, not a log), or the fixture's "
        "uncommitted_rows() reads the committed view -- the section proved nothing about aborts");
  c.note(std::to_string(t.attempts_shown) + " aborted attempts shown to a read_uncommitted " +
         "reader after " + std::to_string(t.crashes_leaving) + " of " + std::to_string(crashes) +
         " crashes; not a loss nor a duplicate: no transaction committed them, and a " +
         "read_committed reader, as every consumer downstream of this guarantee must be, is " +
         "never shown them");
  c.measured["views"] = t.views;
  c.measured["aborted attempts shown"] = t.attempts_shown;
  c.measured["crashes leaving attempts"] = t.crashes_leaving;
  c.measured["committed messages shown"] = t.committed_shown;
}

}  // namespace commit_order::testing::detail
