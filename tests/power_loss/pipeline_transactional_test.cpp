// TransactionalPosition (file log -> SQLite guarded upsert, position in the same transaction)
// under power cuts: cut at every sync point of a run, a fresh pipeline recovers from the durable
// image and runs to the end of the log. No record lost, no order back to an older event, one
// row per order, recovery's invariant check (no row newer than the stored position) holds, and
// a transaction whose commit returned before the cut — rows and position — is still there.
#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "power_loss/pipeline_support.hpp"
#include "support/scratch.hpp"

namespace pl = power_loss::pipelines;
namespace co = commit_order;
namespace sq = commit_order::sqlite;

TEST_CASE("TransactionalPosition, SQLite sink: no acknowledged commit or record lost") {
  using policy = co::TransactionalPosition<>;
  using sink = pl::sqlite_sink_part<power_loss::default_config, sq::guarded_upsert_mode>;
  using store = pl::no_store_part;
  test_support::scratch_dir scratch;
  const auto events = pl::reference_events(scratch / "reference");
  const auto t = power_loss::run_cut_points(
      "TransactionalPosition, guarded upsert (default configuration)", scratch / "root",
      pl::prepare_log, pl::run_until_cut<policy, sink, store>,
      [&](const pl::fs::path& root, const pl::acknowledgements& ack) {
        power_loss::findings f;
        const auto r = pl::recover_and_finish<policy, sink, store>(root, ack, events, f);
        pl::reconcile_keyed(r, events, f);
        return f;
      },
      power_loss::cut_options{.lost_label = "acknowledged records lost", .tail_seeds = {0, 29}});
  MESSAGE(t.summary());
  CHECK(t.syncs >= pl::records / pl::batch);  // at least one sync per transaction
  CHECK(t.cut_points == t.syncs + 1);
  CHECK(t.lost == 0);
  CHECK(t.problem_count == 0);
  static_assert(std::is_same_v<co::sink_durability_t<sink::type>, co::Synced>);
  CHECK(t.count("acknowledged position commits lost") == 0);
  CHECK(t.count("acknowledged writes rolled back") == 0);
}
