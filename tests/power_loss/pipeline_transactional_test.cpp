// SPDX-License-Identifier: BSL-1.0
// TransactionalPosition (file log -> SQLite guarded upsert, position in the same transaction)
// under power cuts: cut at every sync point of a run, a fresh pipeline recovers from the durable
// image and runs to the end of the log. No record lost, no order back to an older event, one
// row per order, recovery's invariant check (no row newer than the stored position) holds, and
// a transaction whose commit returned before the cut — rows and position — is still there.
#include <doctest/doctest.h>

#include <type_traits>

#include "power_loss/pipeline_support.hpp"

namespace pl = power_loss::pipelines;
namespace co = commit_order;
namespace sq = commit_order::sqlite;

TEST_CASE("TransactionalPosition, SQLite sink: no acknowledged commit or record lost") {
  using sink = pl::sqlite_sink_part<power_loss::default_config, sq::guarded_upsert_mode>;
  static_assert(std::is_same_v<co::durability_t<sink::type>, co::Synced>);
  for (const std::size_t batch : pl::batches) {
    const auto t = pl::run_pipeline_cuts<co::TransactionalPosition<>, sink, pl::no_store_part>(
        "TransactionalPosition, guarded upsert (default configuration)", batch,
        "acknowledged records lost", pl::reconcile_keyed);
    MESSAGE(t.summary());
    CHECK(t.syncs >= pl::records / batch);  // at least one sync per transaction
    CHECK(t.cut_points == t.syncs + 1);
    CHECK(t.lost == 0);
    CHECK(t.problem_count == 0);
    CHECK(t.count("acknowledged position commits lost") == 0);
    CHECK(t.count("acknowledged writes rolled back") == 0);
  }
}
