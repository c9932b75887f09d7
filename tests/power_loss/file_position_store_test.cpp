// SPDX-License-Identifier: BSL-1.0
// The file position store under power cuts: 16 commits, cut at every sync point (the temporary
// file's fdatasync and the directory's fsync of each commit), recovered from the durable image
// and from a torn tail. A commit that returned before the cut survives; the stored position is
// one that was committed (the last acknowledged one, or the one under way at the cut); the
// file always loads (never a half-written or a missing position once one was acknowledged).
#include <doctest/doctest.h>

#include <commit_order/adapters/file.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "power_loss/cut_points.hpp"
#include "support/scratch.hpp"

namespace fs = std::filesystem;
namespace co = commit_order;

namespace {

constexpr std::int64_t commits = 16;

co::position committed_at(std::int64_t i) {
  return co::position{3 * i + 1};
}

struct acknowledged {
  std::optional<co::position> committed;  ///< the last commit that returned before the cut
  std::optional<co::position> in_flight;  ///< the commit under way when the power went out
};

acknowledged commit_until_cut(const fs::path& file) {
  acknowledged ack;
  co::file::position_store store(file);
  for (std::int64_t i = 0; i < commits; ++i) {
    store.commit(committed_at(i));
    if (power_loss::power_is_out()) {
      ack.in_flight = committed_at(i);
      return ack;
    }
    ack.committed = committed_at(i);
  }
  return ack;
}

power_loss::findings check_store(const fs::path& file, const acknowledged& ack) {
  power_loss::findings f;
  const std::optional<co::position> stored = co::file::position_store(file).load();
  if (ack.committed && (!stored || *stored < *ack.committed)) {
    ++f.lost;
    return f;
  }
  if (stored && stored != ack.committed && stored != ack.in_flight)
    f.problems.push_back("the stored position " + std::to_string(stored->value()) +
                         " was neither the last acknowledged commit nor the one under way");
  if (stored && stored == ack.in_flight)
    ++f.counts["commits under way that survived"];
  return f;
}

}  // namespace

TEST_CASE("file position store: every commit that returned survives every cut") {
  test_support::scratch_dir scratch;
  power_loss::cut_options o;
  o.tail_seeds = {0, 91};
  o.lost_label = "acknowledged commits lost";
  const auto t = power_loss::run_cut_points(
      "file position store", scratch / "root", [](const fs::path&) {},
      [](const fs::path& root) { return commit_until_cut(root / "position"); },
      [](const fs::path& root, const acknowledged& ack) {
        return check_store(root / "position", ack);
      },
      o);
  MESSAGE(t.summary());
  // At least two sync points per commit: the temporary file's data, then the rename.
  CHECK(t.syncs >= 2 * commits);
  CHECK(t.cut_points == t.syncs + 1);
  CHECK(t.lost == 0);
  CHECK(t.problem_count == 0);
}
