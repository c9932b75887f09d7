// SPDX-License-Identifier: BSL-1.0
// AtLeastOnce pipelines (file log -> SQLite guarded upsert) under power cuts, with the file
// position store and with the SQLite position store: cut at every sync point of a run, a fresh
// pipeline recovers from the durable image and runs to the end of the log. No record may be lost
// (every record behind the stored position has its effect in the table, every order ends at its
// last event), no order may go back to an older event, no order has two rows, and what the run
// acknowledged (a unit's rows written, a position committed) is still there when the part that
// acknowledged it is declared Synced.
//
// The last case is the durability rule's (R9a) question asked by a power cut: a sink declared
// Buffered under a Synced position store. If the rules accept the combination, it must not lose
// records either.
#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "power_loss/pipeline_support.hpp"

namespace pl = power_loss::pipelines;
namespace co = commit_order;
namespace sq = commit_order::sqlite;

namespace {

template <class SinkPart, class StorePart>
void run_at_least_once(const std::string& name) {
  using sink_t = typename SinkPart::type;
  using store_t = typename StorePart::type;
  constexpr bool sink_synced = std::is_same_v<co::durability_t<sink_t>, co::Synced>;
  constexpr bool store_synced = std::is_same_v<co::durability_t<store_t>, co::Synced>;
  for (const std::size_t batch : pl::batches) {
    const auto t = pl::run_pipeline_cuts<co::AtLeastOnce<>, SinkPart, StorePart>(
        name, batch, "acknowledged records lost", pl::reconcile_keyed);
    MESSAGE(t.summary());
    // A Synced sink syncs every unit it writes, a Synced store every position it commits.
    if constexpr (sink_synced && store_synced)
      CHECK(t.syncs >= 2 * (pl::records / batch));
    CHECK(t.cut_points == t.syncs + 1);
    CHECK(t.lost == 0);
    CHECK(t.problem_count == 0);
    if constexpr (sink_synced)
      CHECK(t.count("acknowledged writes rolled back") == 0);
    if constexpr (store_synced)
      CHECK(t.count("acknowledged position commits lost") == 0);
  }
}

using guarded_default = pl::sqlite_sink_part<power_loss::default_config, sq::guarded_upsert_mode>;

}  // namespace

TEST_CASE("AtLeastOnce, SQLite sink + file position store: no acknowledged record lost") {
  run_at_least_once<guarded_default, pl::file_store_part>(
      "AtLeastOnce, guarded upsert (default configuration) + file position store");
}

TEST_CASE("AtLeastOnce, SQLite sink + SQLite position store: no acknowledged record lost") {
  run_at_least_once<guarded_default, pl::sqlite_store_part<power_loss::default_config>>(
      "AtLeastOnce, guarded upsert + SQLite position store (default configuration)");
}

TEST_CASE("AtLeastOnce, a sink declared Buffered under a Synced store: refused, or loses nothing") {
  using sink =
      pl::sqlite_sink_part<power_loss::sqlite_config<sq::wal_normal>, sq::guarded_upsert_mode>;
  using store = pl::file_store_part;
  if constexpr (co::can_make_pipeline<pl::order_log, sink::type, co::AtLeastOnce<>,
                                      co::with_store<store::type>>) {
    run_at_least_once<sink, store>(
        "AtLeastOnce, guarded upsert (WAL, synchronous=NORMAL: Buffered) + file position store "
        "(Synced), accepted by the rules");
  } else {
    MESSAGE(
        "AtLeastOnce with a Buffered sink under a Synced position store is refused at "
        "compile time: nothing to cut");
  }
}
