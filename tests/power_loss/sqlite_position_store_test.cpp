// SPDX-License-Identifier: BSL-1.0
// The SQLite position store under power cuts, in the default configuration and in every
// journal x synchronous combination: 16 commits, cut at every sync point, recovered by
// reopening the database from the durable image. The stored position is always one that was
// committed (or none, before the first), the database passes integrity_check, and a commit that
// returned before the cut survives when the store's type declares `Synced`; under `Buffered`
// the lost commits are counted and printed, not failed.
#include <doctest/doctest.h>

#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>

#include "power_loss/cut_points.hpp"
#include "power_loss/sqlite_configs.hpp"
#include "support/scratch.hpp"

namespace fs = std::filesystem;
namespace co = commit_order;
namespace sq = commit_order::sqlite;

namespace {

constexpr std::int64_t commits = 16;

co::position committed_at(std::int64_t i) {
  return co::position{5 * i + 2};
}

struct acknowledged {
  std::int64_t commits = 0;  ///< commits that returned before the cut
  bool in_flight = false;    ///< a commit was under way when the power went out
};

template <class Config>
acknowledged commit_until_cut(const fs::path& db) {
  acknowledged ack;
  typename Config::store store(db, power_loss::store_options("orders"));
  for (std::int64_t i = 0; i < commits; ++i) {
    if (power_loss::power_is_out())
      return ack;  // the cut came while opening the database
    store.commit(co::partition_id{0}, committed_at(i));
    if (power_loss::power_is_out()) {
      ack.in_flight = true;
      return ack;
    }
    ack.commits = i + 1;
  }
  return ack;
}

template <class Config>
power_loss::findings check_store(const fs::path& db, const acknowledged& ack) {
  using store_t = typename Config::store;
  constexpr bool synced = std::is_same_v<co::durability_t<store_t>, co::Synced>;
  power_loss::findings f;
  {
    // The store does not expose its connection: the same database, in the same mode.
    auto check = Config::open(db);
    if (const auto verdict = power_loss::integrity(check); verdict != "ok")
      f.problems.push_back("integrity_check: " + verdict);
  }
  const std::optional<co::position> stored =
      store_t(db, power_loss::store_options("orders")).load();
  // How many commits the stored position stands for: 0 for none, i + 1 for committed_at(i).
  std::int64_t survived = 0;
  if (stored) {
    survived = -1;
    for (std::int64_t i = 0; i < commits; ++i)
      if (*stored == committed_at(i))
        survived = i + 1;
    if (survived < 0) {
      f.problems.push_back("the stored position " + std::to_string(stored->value()) +
                           " was never committed");
      return f;
    }
  }
  const std::int64_t begun = ack.commits + (ack.in_flight ? 1 : 0);
  if (survived > begun)
    f.problems.push_back("a commit that was never begun survived");
  if (survived < ack.commits) {
    if constexpr (synced)
      f.lost += ack.commits - survived;
    else
      f.counts["acknowledged commits lost (declared Buffered)"] += ack.commits - survived;
  }
  return f;
}

template <class Config>
void run_store() {
  using store_t = typename Config::store;
  constexpr bool synced = std::is_same_v<co::durability_t<store_t>, co::Synced>;
  test_support::scratch_dir scratch;
  const auto t = power_loss::run_cut_points(
      "SQLite position store, " + Config::name() + " (declared " +
          std::string(co::durability_t<store_t>::name) + ")",
      scratch / "root", [](const fs::path&) {},
      [](const fs::path& root) { return commit_until_cut<Config>(root / "positions.db"); },
      [](const fs::path& root, const acknowledged& ack) {
        return check_store<Config>(root / "positions.db", ack);
      },
      power_loss::cut_options{.lost_label = "acknowledged commits lost", .tail_seeds = {0, 13}});
  MESSAGE(t.summary());
  if constexpr (synced)
    CHECK(t.syncs >= commits);
  CHECK(t.cut_points == t.syncs + 1);
  CHECK(t.problem_count == 0);
  if constexpr (synced)
    CHECK(t.lost == 0);
}

}  // namespace

// clang-format off
TEST_CASE("SQLite position store, default configuration: acknowledged commits survive iff declared Synced") { run_store<power_loss::default_config>(); }
TEST_CASE("SQLite position store, wal_full: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::wal_full>>(); }
TEST_CASE("SQLite position store, wal_extra: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::wal_extra>>(); }
TEST_CASE("SQLite position store, wal_normal: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::wal_normal>>(); }
TEST_CASE("SQLite position store, delete_extra: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::delete_extra>>(); }
TEST_CASE("SQLite position store, delete_full: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::delete_full>>(); }
TEST_CASE("SQLite position store, truncate_extra: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::truncate_extra>>(); }
TEST_CASE("SQLite position store, truncate_full: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::truncate_full>>(); }
TEST_CASE("SQLite position store, persist_extra: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::persist_extra>>(); }
TEST_CASE("SQLite position store, persist_full: acknowledged commits survive iff declared Synced") { run_store<power_loss::sqlite_config<sq::persist_full>>(); }
// clang-format on
