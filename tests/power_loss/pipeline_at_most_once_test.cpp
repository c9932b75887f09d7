// SPDX-License-Identifier: BSL-1.0
// AtMostOnce (file log -> SQLite append table, file position store) under power cuts: cut at
// every sync point of a run, a fresh pipeline recovers from the durable image and runs to the end
// of the log. The policy commits the position before it writes, so a cut may lose records — but
// only records of the unit the cut fell in, none whose write was acknowledged, at most one batch
// per cut, and every one of them accounted for: the records missing behind the stored position
// at recovery are exactly the ones the final table lacks. No record is written twice.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "power_loss/pipeline_support.hpp"

namespace pl = power_loss::pipelines;
namespace co = commit_order;
namespace sq = commit_order::sqlite;

namespace {

void account_for_loss(const pl::recovery& r, const pl::acknowledgements& ack,
                      const std::vector<pl::order_event>&, std::size_t batch,
                      power_loss::findings& f) {
  std::set<std::int64_t> present;
  for (const auto& row : r.recovered)
    present.insert(row.source_offset);
  // The unit the cut fell in: from the position commit before the last one begun, to the last.
  const auto& begun = ack.commits_begun;
  const std::int64_t unit_end = begun.empty() ? 0 : begun.back().value();
  const std::int64_t unit_begin = begun.size() < 2 ? 0 : begun[begun.size() - 2].value();
  std::set<std::int64_t> missing;
  for (std::int64_t o = 0; o < r.stored.value_or(co::position{0}).value(); ++o) {
    if (present.contains(o))
      continue;
    missing.insert(o);
    if (o < unit_begin || o >= unit_end)
      f.problems.push_back("record " + std::to_string(o) + " was lost outside the unit [" +
                           std::to_string(unit_begin) + ", " + std::to_string(unit_end) +
                           ") the cut fell in");
  }
  if (missing.size() > batch)
    f.problems.push_back(std::to_string(missing.size()) + " records lost by one cut");
  f.unacknowledged_lost += static_cast<std::int64_t>(missing.size());

  // After the run to the end: one row per record, except the records lost above.
  std::map<std::int64_t, int> copies;
  for (const auto& row : r.final_rows)
    ++copies[row.source_offset];
  for (std::int64_t o = 0; o < pl::records; ++o) {
    const int n = copies[o];
    if (n == 0 && !missing.contains(o))
      ++f.lost;  // lost without being accounted for at recovery
    if (n > 1)
      f.problems.push_back("record " + std::to_string(o) + " was written " + std::to_string(n) +
                           " times");
  }
}

}  // namespace

TEST_CASE("AtMostOnce, SQLite append sink + file position store: loss bounded and accounted for") {
  using sink = pl::sqlite_sink_part<power_loss::default_config, sq::append_mode>;
  static_assert(std::is_same_v<co::durability_t<sink::type>, co::Synced>);
  for (const std::size_t batch : pl::batches) {
    const auto t = pl::run_pipeline_cuts<co::AtMostOnce<>, sink, pl::file_store_part>(
        "AtMostOnce, append sink (default configuration) + file position store", batch,
        "records lost without being accounted for", account_for_loss);
    MESSAGE(t.summary());
    CHECK(t.syncs >= 2 * (pl::records / batch));
    CHECK(t.cut_points == t.syncs + 1);
    CHECK(t.lost == 0);
    CHECK(t.problem_count == 0);
    CHECK(t.count("acknowledged writes rolled back") == 0);
    CHECK(t.count("acknowledged position commits lost") == 0);
    // The failure direction is real: cuts inside a unit do lose its unwritten records.
    CHECK(t.unacknowledged_lost > 0);
  }
}
