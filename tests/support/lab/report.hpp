// SPDX-License-Identifier: BSL-1.0
// support/lab/report.hpp — the table, the guarantees each policy owes, and a reading of it.
#pragma once

#include <cstdint>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "support/lab/policies.hpp"
#include "support/lab/supervisor.hpp"

namespace crash_lab {

/// The ways `o` broke what its policy promises (empty: the guarantee held). `batch` is the
/// unit of work, which bounds what one kill may cost AtMostOnce.
inline std::vector<std::string> violations(const policy_outcome& o, std::size_t batch) {
  std::vector<std::string> v;
  const auto require_zero = [&](std::int64_t n, const char* what) {
    if (n != 0)
      v.push_back(std::to_string(n) + " " + what);
  };
  // Any policy: a row must be some record of the log, as the log has it.
  require_zero(o.mismatched_rows, "rows that match no record of the log");
  if (o.sink == sink_kind::kafka) {
    // An output topic: every applied record is a message, and a reader sees them all.
    switch (o.policy) {
      case policy_id::transactional:
        // Its state is the topic as a read_committed reader sees it.
        require_zero(o.rows_lost, "records with no message");
        require_zero(o.duplicate_rows, "messages written twice");
        require_zero(o.regressed_rows, "orders going back to an older event");
        break;
      case policy_id::at_least_once: {
        // Duplicate runs are its guarantee (MayDuplicate): one unit at most per kill.
        require_zero(o.rows_lost, "records with no message");
        const auto bound = static_cast<std::int64_t>(batch) * o.kills;
        if (o.duplicate_rows > bound)
          v.push_back(std::to_string(o.duplicate_rows) + " messages written twice, more than " +
                      "one unit of work (" + std::to_string(batch) + ") per kill");
        require_zero(o.aborted_messages, "aborted messages (it writes no transaction)");
        break;
      }
      case policy_id::at_most_once:
        require_zero(o.duplicate_rows, "messages written twice");
        require_zero(o.regressed_rows, "orders going back to an older event");
        if (o.max_lost_per_kill() > static_cast<std::int64_t>(batch))
          v.push_back("one kill lost " + std::to_string(o.max_lost_per_kill()) +
                      " records, more than one unit of work (" + std::to_string(batch) + ")");
        break;
      case policy_id::at_most_once_auto:
        v.push_back("it does not run into a topic (rule R1)");
        break;
    }
    return v;
  }
  switch (o.policy) {
    case policy_id::at_least_once:
    case policy_id::transactional:
      require_zero(o.rows_lost, "rows lost");
      require_zero(o.duplicate_rows, "duplicate rows");
      require_zero(o.regressed_rows, "regressed rows");
      break;
    case policy_id::at_most_once:
      require_zero(o.duplicate_rows, "duplicate rows");
      if (o.max_lost_per_kill() > static_cast<std::int64_t>(batch))
        v.push_back("one kill lost " + std::to_string(o.max_lost_per_kill()) +
                    " records, more than one unit of work (" + std::to_string(batch) + ")");
      break;
    case policy_id::at_most_once_auto:
      // Promises neither no-loss nor no-replay; the keyed sink R1 demands still rules out
      // duplicate rows.
      require_zero(o.duplicate_rows, "duplicate rows");
      break;
  }
  return v;
}

inline void print_table(std::ostream& os, const std::vector<policy_outcome>& outcomes) {
  const bool topic = !outcomes.empty() && outcomes.front().sink == sink_kind::kafka;
  std::vector<std::string> head{"policy",         "kills",           "records",
                                "rows expected",  "rows lost",       "duplicate rows",
                                "regressed rows", "replays absorbed"};
  if (topic)
    head = {"policy",          "kills",         "records",           "messages expected",
            "records missing", "written twice", "orders going back", "aborted, seen uncommitted"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& o : outcomes)
    rows.push_back({std::string(display_name(o.policy)), std::to_string(o.kills),
                    std::to_string(o.records), std::to_string(o.rows_expected),
                    std::to_string(o.rows_lost), std::to_string(o.duplicate_rows),
                    std::to_string(o.regressed_rows),
                    std::to_string(topic ? o.aborted_messages : o.replays_absorbed)});
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& r : rows)
      width[c] = std::max(width[c], r[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c == 0)
        os << std::left << std::setw(static_cast<int>(width[c])) << cells[c];
      else
        os << "  " << std::right << std::setw(static_cast<int>(width[c])) << cells[c];
    }
    os << "\n";
  };
  line(head);
  std::string rule;
  for (std::size_t c = 0; c < head.size(); ++c)
    rule += std::string(width[c], '-') + (c + 1 < head.size() ? "  " : "");
  os << rule << "\n";
  for (const auto& r : rows)
    line(r);
}

/// One paragraph, from the numbers: which ordering lost, which replayed, and why.
/// The same for runs into an output topic.
inline std::string reading_topic(const std::vector<policy_outcome>& outcomes, std::size_t batch) {
  std::ostringstream s;
  for (const auto& o : outcomes) {
    switch (o.policy) {
      case policy_id::at_most_once:
        s << "AtMostOnce commits the group's offset before it produces: " << o.rows_lost << " of "
          << o.records << " records never reached the topic (at most " << o.max_lost_per_kill()
          << " per kill, one unit being " << batch << "), and nothing was written twice. ";
        break;
      case policy_id::at_least_once:
        s << "AtLeastOnce commits the offset once the brokers acknowledged the unit: "
          << o.rows_lost << " records missing, and ";
        if (o.duplicate_rows > 0)
          s << o.duplicate_rows << " messages written twice, as runs at new offsets ("
            << o.regressed_rows
            << " orders seen going back to an older event by a reader of the whole topic): "
               "an offset guard downstream cannot absorb them, a key carried from the event "
               "(the order id and its sequence) can. ";
        else
          s << "no kill landed between the acknowledgement and the commit this time, so "
               "nothing was written twice, but the order allows it. ";
        break;
      case policy_id::transactional:
        s << "TransactionalPosition commits each unit's messages and the group's offsets in "
             "one producer transaction: a read_committed reader saw every record once, in "
             "order ("
          << o.rows_lost << " missing, " << o.duplicate_rows << " twice, " << o.regressed_rows
          << " going back). ";
        if (o.aborted_messages > 0)
          s << "A read_uncommitted reader was also shown " << o.aborted_messages
            << " messages of the transactions the kills left open, which the successors "
               "aborted: not a failure of the sink, whose state is the topic as a "
               "read_committed reader sees it. ";
        else
          s << "No kill left an open transaction with messages in it this time; a "
               "read_uncommitted reader would be shown those too, which is not a failure of the "
               "sink: its state is the topic as a read_committed reader sees it. ";
        break;
      case policy_id::at_most_once_auto:
        break;
    }
  }
  return s.str();
}

inline std::string reading(const std::vector<policy_outcome>& outcomes, std::size_t batch) {
  if (!outcomes.empty() && outcomes.front().sink == sink_kind::kafka)
    return reading_topic(outcomes, batch);
  std::ostringstream s;
  for (const auto& o : outcomes) {
    switch (o.policy) {
      case policy_id::at_most_once:
        s << "AtMostOnce commits the position before it writes: ";
        if (o.rows_lost > 0)
          s << "kills that landed between the two skipped the rest of their batch for good, "
            << o.rows_lost << " of " << o.records << " records (at most " << o.max_lost_per_kill()
            << " per kill, one unit being " << batch << "), with no error, no retry and "
            << o.duplicate_rows
            << " duplicates: a shortfall only a reconciliation like this one finds. ";
        else
          s << "no kill landed between the two this time, so nothing was lost, but the order "
               "allows it. ";
        break;
      case policy_id::at_least_once:
        s << "AtLeastOnce writes before it commits: ";
        if (o.replays_absorbed > 0)
          s << "kills between the two made restarts read written records again, and the "
               "offset guard absorbed "
            << o.replays_absorbed
            << " replayed writes (the duplicates happened; the "
               "event-derived key and the guard made them harmless), ";
        else
          s << "no kill landed between the two this time, ";
        s << "leaving " << o.rows_lost << " lost, " << o.duplicate_rows << " duplicate and "
          << o.regressed_rows << " regressed rows. ";
        break;
      case policy_id::transactional:
        s << "TransactionalPosition commits the rows and the position in one transaction, so "
             "a kill took both back together and each restart resumed at the last commit: "
          << o.replays_absorbed << " replays, " << o.rows_lost << " lost, " << o.duplicate_rows
          << " duplicate, " << o.regressed_rows << " regressed. ";
        break;
      case policy_id::at_most_once_auto:
        s << "AtMostOnce<AutoCommit> commits whatever was polled whenever its timer fires, "
             "written or not, and re-reads whatever was written after the last tick; ";
        if (o.regressed_rows > 0)
          s << "its upsert has no offset guard, so a replay first wrote older events over "
               "newer ones, and kills caught "
            << o.regressed_rows << " rows gone back to an older event mid-replay; ";
        else
          s << "no kill happened to land inside one of its replays this time; ";
        if (o.rows_lost > 0)
          s << o.rows_lost << " orders ended without their latest update. ";
        else
          s << "every order ended with its latest update this time (a keyed table would not "
               "show a lost intermediate update), but the type says it may lose. ";
        break;
    }
  }
  return s.str();
}

}  // namespace crash_lab
