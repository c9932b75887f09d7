// SPDX-License-Identifier: BSL-1.0
// Real consumer processes against a real PostgreSQL server:
//   - two processes on one partition, the first paused inside its unit while the second takes
//     the partition over: the first (a zombie) is fenced at its commit, nothing of its unit
//     written;
//   - 200 SIGKILLs across the four policies of the crash lab, each table reconciled against
//     the log: nothing lost, duplicated or regressed where the policy promises it.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "pg_support.hpp"
#include "support/crash_runs.hpp"
#include "support/lab/process.hpp"
#include "support/lab/report.hpp"
#include "support/lab/supervisor.hpp"
#include "support/scratch.hpp"

using namespace pg_test;

namespace {

std::filesystem::path self() {
  return std::filesystem::read_symlink("/proc/self/exe");
}

// Reads the child's lines until one starts with `prefix`; returns it (empty on exit/timeout).
std::string wait_for(crash_lab::child_process& child, std::string_view prefix) {
  std::string found;
  child.read_until(
      std::chrono::steady_clock::now() + std::chrono::seconds(60), [](std::string_view) {},
      [&](std::string_view line) {
        if (!line.starts_with(prefix))
          return false;
        found = line;
        return true;
      });
  return found;
}

}  // namespace

TEST_CASE(
    "two consumer processes on one partition: the paused zombie is fenced, none of it written") {
  test_support::scratch_dir dir;
  // The same log twice: a file log is read by one process at a time.
  crash_lab::write_orders(dir / "log", 400, 40, 11);
  crash_lab::write_orders(dir / "log_copy", 400, 40, 11);
  const std::string schema = fresh_schema(conninfo(), "t_zombie_processes");
  const std::filesystem::path go = dir / "go";

  // The first consumer claims the partition (epoch 1) and stops inside its first unit.
  crash_lab::child_process zombie(
      self(), {"--zombie-child", conninfo(), schema, (dir / "log").string(), "-1", go.string()});
  CHECK(wait_for(zombie, "ready ") == "ready 0 1");
  REQUIRE(wait_for(zombie, "paused") == "paused");

  // The second takes the partition over (epoch 2) and stops inside its first unit too: the
  // zombie's records are still unwritten, so a zombie commit would land (the offset guard
  // could not hide it).
  const std::filesystem::path go_successor = dir / "go_successor";
  crash_lab::child_process successor(
      self(), {"--zombie-child", conninfo(), schema, (dir / "log_copy").string(), "-2",
               go_successor.string()});
  CHECK(wait_for(successor, "ready ") == "ready 0 2");
  REQUIRE(wait_for(successor, "paused") == "paused");

  // The zombie wakes up and commits its unit: refused, with both epochs named.
  std::ofstream(go).put('\n');
  CHECK(wait_for(zombie, "fenced ") == "fenced 1 2");
  CHECK(zombie.wait([](std::string_view) {}).code == 5);
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 0);  // nothing of its unit was written
  CHECK(c.integer("SELECT position FROM commit_order_positions") == std::nullopt);

  // The successor goes on and consumes the whole log.
  std::ofstream(go_successor).put('\n');
  CHECK(wait_for(successor, "done ") == "done 400");
  CHECK(successor.wait([](std::string_view) {}).code == 0);

  CHECK(c.count("orders_flat WHERE customer_id = -1") == 0);  // nothing of the zombie's
  CHECK(c.count("orders_flat WHERE customer_id <> -2") == 0);
  CHECK(c.count("orders_flat") == 40);
  CHECK(c.integer("SELECT position FROM commit_order_positions") == 400);
  CHECK(c.integer("SELECT owner_epoch FROM commit_order_positions") == 2);
  // Each order shows its last event of the log.
  const auto events = crash_lab::read_orders(dir / "log");
  std::map<std::int64_t, std::int64_t> last_seq;
  for (const auto& e : events)
    last_seq[e.order_id] = e.event_seq;
  for (const auto& [order, seq] : last_seq)
    CHECK(c.integer("SELECT event_seq FROM orders_flat WHERE order_id = " +
                    std::to_string(order)) == seq);
}

namespace {

crash_lab::policy_outcome run(crash_lab::policy_id policy, int kills, std::int64_t records,
                              const test_support::scratch_dir& dir) {
  auto config = test_support::crash_config(policy, kills, records, 20240612, dir);
  config.sink = crash_lab::sink_kind::postgres;
  config.pg_conninfo = synced_conninfo();  // every lab part is Synced: fsync=on
  return test_support::run_crash_lab(config, policy, " on PostgreSQL");
}

}  // namespace

TEST_CASE(
    "TransactionalPosition on PostgreSQL under 60 SIGKILLs: nothing lost, duplicated, regressed") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::transactional, 60, 1400, dir);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  CHECK(o.replays_absorbed == 0);  // a restart never re-applies a committed record
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE(
    "AtLeastOnce on PostgreSQL under 60 SIGKILLs: replays absorbed, nothing lost or regressed") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_least_once, 60, 1400, dir);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  CHECK(o.replays_absorbed > 0);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("AtMostOnce on PostgreSQL under 40 SIGKILLs: loss bounded by one unit per kill") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once, 40, 1000, dir);
  test_support::check_loss_accounted(o, 40);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("AtMostOnce<AutoCommit> on PostgreSQL under 40 SIGKILLs: no duplicate rows") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once_auto, 40, 1000, dir);
  CHECK(o.duplicate_rows == 0);
  CHECK(crash_lab::violations(o, 8).empty());
}
