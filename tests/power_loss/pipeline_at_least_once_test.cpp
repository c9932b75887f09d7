// AtLeastOnce pipelines (file log -> SQLite guarded upsert) under power cuts, with the file
// position store and with the SQLite position store: cut at every sync point of a run, a fresh
// pipeline recovers from the durable image and runs to the end of the log. No record may be lost
// (every order shows its last event), no order may go back to an older event, no order has two
// rows, and what the run acknowledged (a row written, a position committed) is still there when
// the part that acknowledged it is declared Synced.
//
// The last case is the durability rule's (R9) question asked by a power cut: a sink declared
// Buffered under a Synced position store. If the rules accept the combination, it must not lose
// records either.
#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "power_loss/pipeline_support.hpp"
#include "support/scratch.hpp"

namespace pl = power_loss::pipelines;
namespace co = commit_order;
namespace sq = commit_order::sqlite;

namespace {

template <class SinkPart, class StorePart>
power_loss::tally run_at_least_once(const std::string& name) {
  using policy = co::AtLeastOnce<>;
  test_support::scratch_dir scratch;
  const auto events = pl::reference_events(scratch / "reference");
  return power_loss::run_cut_points(
      name, scratch / "root", pl::prepare_log, pl::run_until_cut<policy, SinkPart, StorePart>,
      [&](const pl::fs::path& root, const pl::acknowledgements& ack) {
        power_loss::findings f;
        const auto r = pl::recover_and_finish<policy, SinkPart, StorePart>(root, ack, events, f);
        pl::reconcile_keyed(r, events, f);
        return f;
      },
      power_loss::cut_options{.lost_label = "acknowledged records lost", .tail_seeds = {0, 29}});
}

template <class SinkPart, class StorePart>
void check_at_least_once(const power_loss::tally& t) {
  using sink_t = typename SinkPart::type;
  using store_t = typename StorePart::type;
  constexpr bool sink_synced = std::is_same_v<co::sink_durability_t<sink_t>, co::Synced>;
  MESSAGE(t.summary());
  // A Synced sink syncs every row it writes outside a transaction.
  if constexpr (sink_synced)
    CHECK(t.syncs >= pl::records);
  CHECK(t.cut_points == t.syncs + 1);
  CHECK(t.lost == 0);
  CHECK(t.problem_count == 0);
  if constexpr (sink_synced)
    CHECK(t.count("acknowledged writes rolled back") == 0);
  if constexpr (std::is_same_v<co::store_durability_t<store_t>, co::Synced>)
    CHECK(t.count("acknowledged position commits lost") == 0);
}

using guarded_default = pl::sqlite_sink_part<power_loss::default_config, sq::guarded_upsert_mode>;

}  // namespace

TEST_CASE("AtLeastOnce, SQLite sink + file position store: no acknowledged record lost") {
  using store = pl::file_store_part;
  const auto t = run_at_least_once<guarded_default, store>(
      "AtLeastOnce, guarded upsert (default configuration) + file position store");
  check_at_least_once<guarded_default, store>(t);
}

TEST_CASE("AtLeastOnce, SQLite sink + SQLite position store: no acknowledged record lost") {
  using store = pl::sqlite_store_part<power_loss::default_config>;
  const auto t = run_at_least_once<guarded_default, store>(
      "AtLeastOnce, guarded upsert + SQLite position store (default configuration)");
  check_at_least_once<guarded_default, store>(t);
}

TEST_CASE("AtLeastOnce, a sink declared Buffered under a Synced store: refused, or loses nothing") {
  using sink = pl::sqlite_sink_part<power_loss::wal_normal, sq::guarded_upsert_mode>;
  using store = pl::file_store_part;
  if constexpr (co::can_make_pipeline<pl::order_log, sink::type, co::AtLeastOnce<>,
                                      co::with_store<store::type>>) {
    const auto t = run_at_least_once<sink, store>(
        "AtLeastOnce, guarded upsert (WAL, synchronous=NORMAL: Buffered) + file position store "
        "(Synced), accepted by the rules");
    check_at_least_once<sink, store>(t);
  } else {
    MESSAGE(
        "AtLeastOnce with a Buffered sink under a Synced position store is refused at "
        "compile time: nothing to cut");
  }
}
