// SPDX-License-Identifier: BSL-1.0
// The SQLite sinks under power cuts, in the default configuration and in every journal x
// synchronous combination the adapter offers: 12 units of work (9 transactions of 3 rows and
// the position, 3 single autocommit rows), cut at every sync point SQLite makes, recovered by
// reopening the database from the durable image.
//
// After every cut the table and the position row must be exactly the state some prefix of the
// units left (a transaction is all there or not at all; no unit that was never begun; the
// database passes integrity_check). A unit whose commit returned before the cut must be in
// that prefix when the sink's type declares `Synced`. Under a combination declared `Buffered`
// the loss is counted and printed, and not failed: that is what Buffered means.
#include <doctest/doctest.h>

#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "power_loss/cut_points.hpp"
#include "power_loss/sqlite_configs.hpp"
#include "support/scratch.hpp"

namespace fs = std::filesystem;
namespace co = commit_order;
namespace sq = commit_order::sqlite;

namespace {

struct item {
  std::int64_t id = 0;
  std::int64_t version = 0;
  std::int64_t unit = 0;
};

struct items final : sq::table_layout<"items", item, sq::key_columns<sq::column<"id", &item::id>>,
                                      sq::value_columns<sq::column<"version", &item::version>,
                                                        sq::column<"unit", &item::unit>>> {};

constexpr std::int64_t units = 12;

bool autocommit_unit(std::int64_t j) {
  return j % 4 == 3;
}

// The rows of unit j, with their source offsets. Keys repeat across units, so later units
// update rows earlier ones wrote (the journal or WAL then holds pages that matter).
std::vector<std::pair<co::offset, item>> rows_of(std::int64_t j) {
  std::vector<std::pair<co::offset, item>> rows;
  const std::int64_t count = autocommit_unit(j) ? 1 : 3;
  for (std::int64_t r = 0; r < count; ++r)
    rows.emplace_back(co::offset{3 * j + r}, item{(j + 2 * r) % 5, j + 1, j});
  return rows;
}

co::position position_of(std::int64_t j) {
  return co::position{3 * j + 3};
}

// A table as a comparable value: (id, version, unit, source offset) in the order that matters
// (by key for a keyed table, by insertion for the append table), plus the stored position.
using row_tuple = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
struct table_state {
  std::vector<row_tuple> rows;
  std::optional<co::position> position;
  bool operator==(const table_state&) const = default;
};

template <class Mode>
table_state expected_after(std::int64_t m) {
  table_state s;
  std::map<std::int64_t, row_tuple> keyed;
  for (std::int64_t j = 0; j < m; ++j) {
    for (const auto& [at, row] : rows_of(j)) {
      const row_tuple t{row.id, row.version, row.unit, at.value()};
      if constexpr (Mode::keyed)
        keyed[row.id] = t;  // offsets only grow: the guard always lets the write through
      else
        s.rows.push_back(t);
    }
    if (!autocommit_unit(j))
      s.position = position_of(j);
  }
  for (const auto& [id, t] : keyed)
    s.rows.push_back(t);
  return s;
}

template <class Sink>
table_state read_state(Sink& sink) {
  table_state s;
  const bool keyed = Sink::mode::keyed;
  auto q =
      sink.database().prepare(std::string("SELECT id, version, unit, source_offset FROM items ") +
                              (keyed ? "ORDER BY id" : "ORDER BY rowid"));
  while (q.step())
    s.rows.emplace_back(q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3));
  s.position = sink.load_position();
  return s;
}

struct acknowledged {
  std::int64_t units = 0;  ///< units whose commit (or autocommit apply) returned before the cut
  bool in_flight = false;  ///< a unit was under way when the power went out
};

template <class Sink, class Config>
acknowledged write_until_cut(const fs::path& db) {
  acknowledged ack;
  Sink sink(db, power_loss::sink_options("items"));
  for (std::int64_t j = 0; j < units; ++j) {
    if (power_loss::power_is_out())
      return ack;  // the cut came while opening the database: no unit was begun
    if (autocommit_unit(j)) {
      for (const auto& [at, row] : rows_of(j))
        sink.apply(co::partition_id{0}, at, row);
    } else {
      sink.begin();
      for (const auto& [at, row] : rows_of(j))
        sink.apply(co::partition_id{0}, at, row);
      sink.store_position(co::partition_id{0}, position_of(j));
      sink.commit();
    }
    if (power_loss::power_is_out()) {
      ack.in_flight = true;
      return ack;
    }
    ack.units = j + 1;
  }
  return ack;
}

template <class Sink, class Config>
power_loss::findings check_sink(const fs::path& db, const acknowledged& ack) {
  constexpr bool synced = std::is_same_v<co::durability_t<Sink>, co::Synced>;
  power_loss::findings f;
  Sink sink(db, power_loss::sink_options("items"));  // the recovery: a hot journal or the WAL
  if (const auto verdict = power_loss::integrity(sink.database()); verdict != "ok")
    f.problems.push_back("integrity_check: " + verdict);
  const table_state now = read_state(sink);
  std::optional<std::int64_t> prefix;
  for (std::int64_t m = 0; m <= units && !prefix; ++m)
    if (now == expected_after<typename Sink::mode>(m))
      prefix = m;
  if (!prefix) {
    f.problems.push_back("the table is no state a prefix of the units left (" +
                         std::to_string(now.rows.size()) + " rows, position " +
                         (now.position ? std::to_string(now.position->value()) : "none") +
                         "): a torn transaction");
    return f;
  }
  const std::int64_t begun = ack.units + (ack.in_flight ? 1 : 0);
  if (*prefix > begun)
    f.problems.push_back("unit " + std::to_string(*prefix - 1) + " survived but was never begun");
  if (*prefix < ack.units) {
    if constexpr (synced)
      f.lost += ack.units - *prefix;
    else
      f.counts["acknowledged units lost (declared Buffered)"] += ack.units - *prefix;
  }
  if (ack.in_flight && *prefix == begun)
    ++f.counts["units under way that survived"];
  return f;
}

template <class Mode, class Config>
void run_sink(const char* sink_name) {
  using sink_t = typename Config::template sink<items, Mode>;
  constexpr bool synced = std::is_same_v<co::durability_t<sink_t>, co::Synced>;
  test_support::scratch_dir scratch;
  {
    // What the configuration really runs: read back from SQLite, printed for the record.
    sink_t probe(scratch / "probe.db", power_loss::sink_options("items"));
    MESSAGE(std::string(sink_name)
            << ", " << Config::name()
            << ": journal_mode=" << power_loss::pragma(probe.database(), "journal_mode")
            << " synchronous=" << power_loss::pragma(probe.database(), "synchronous")
            << ", declared " << co::durability_t<sink_t>::name);
  }
  const auto t = power_loss::run_cut_points(
      std::string(sink_name) + ", " + Config::name() + " (declared " +
          std::string(co::durability_t<sink_t>::name) + ")",
      scratch / "root", [](const fs::path&) {},
      [](const fs::path& root) { return write_until_cut<sink_t, Config>(root / "sink.db"); },
      [](const fs::path& root, const acknowledged& ack) {
        return check_sink<sink_t, Config>(root / "sink.db", ack);
      },
      power_loss::cut_options{.lost_label = "acknowledged units lost", .tail_seeds = {0, 5}});
  MESSAGE(t.summary());
  // A commit declared Synced syncs before it returns: at least one sync point per unit.
  if constexpr (synced)
    CHECK(t.syncs >= units);
  CHECK(t.cut_points == t.syncs + 1);
  CHECK(t.problem_count == 0);
  if constexpr (synced)
    CHECK(t.lost == 0);
}

}  // namespace

// clang-format off
TEST_CASE("SQLite guarded upsert sink, default configuration: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::default_config>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, wal_full: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::wal_full>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, wal_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::wal_extra>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, wal_normal: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::wal_normal>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, delete_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::delete_extra>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, delete_full: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::delete_full>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, truncate_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::truncate_extra>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, truncate_full: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::truncate_full>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, persist_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::persist_extra>>("guarded upsert sink"); }
TEST_CASE("SQLite guarded upsert sink, persist_full: acknowledged commits survive iff declared Synced") { run_sink<sq::guarded_upsert_mode, power_loss::sqlite_config<sq::persist_full>>("guarded upsert sink"); }
TEST_CASE("SQLite upsert sink, default configuration: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::default_config>("upsert sink"); }
TEST_CASE("SQLite upsert sink, wal_full: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::wal_full>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, wal_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::wal_extra>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, wal_normal: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::wal_normal>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, delete_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::delete_extra>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, delete_full: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::delete_full>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, truncate_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::truncate_extra>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, truncate_full: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::truncate_full>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, persist_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::persist_extra>>("upsert sink"); }
TEST_CASE("SQLite upsert sink, persist_full: acknowledged commits survive iff declared Synced") { run_sink<sq::upsert_mode, power_loss::sqlite_config<sq::persist_full>>("upsert sink"); }
TEST_CASE("SQLite append sink, default configuration: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::default_config>("append sink"); }
TEST_CASE("SQLite append sink, wal_full: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::wal_full>>("append sink"); }
TEST_CASE("SQLite append sink, wal_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::wal_extra>>("append sink"); }
TEST_CASE("SQLite append sink, wal_normal: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::wal_normal>>("append sink"); }
TEST_CASE("SQLite append sink, delete_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::delete_extra>>("append sink"); }
TEST_CASE("SQLite append sink, delete_full: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::delete_full>>("append sink"); }
TEST_CASE("SQLite append sink, truncate_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::truncate_extra>>("append sink"); }
TEST_CASE("SQLite append sink, truncate_full: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::truncate_full>>("append sink"); }
TEST_CASE("SQLite append sink, persist_extra: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::persist_extra>>("append sink"); }
TEST_CASE("SQLite append sink, persist_full: acknowledged commits survive iff declared Synced") { run_sink<sq::append_mode, power_loss::sqlite_config<sq::persist_full>>("append sink"); }
// clang-format on
