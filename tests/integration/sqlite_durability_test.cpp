// SPDX-License-Identifier: BSL-1.0
// What a SQLite sink or store declares about power loss is what its connection runs: the
// durability mode (journal_mode x synchronous) is part of the type, the default is power-safe,
// the pragmas are read back, and docs/adapters.md's table says what the types say.
#include <doctest/doctest.h>

#include <array>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "sqlite_spy_vfs.hpp"
#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace co = commit_order;
namespace sq = commit_order::sqlite;
using crash_lab::order_event;
using crash_lab::orders_flat;
using test_support::scratch_dir;
using test_support::spy_vfs;

// ---- the types -----------------------------------------------------------------------------

// The default is power-safe: WAL + FULL, Synced, for every sink and the store.
static_assert(std::is_same_v<sq::guarded_upsert_sink<orders_flat>,
                             sq::guarded_upsert_sink<orders_flat, sq::wal_full>>);
static_assert(std::is_same_v<sq::position_store<>, sq::position_store<sq::wal_full>>);
static_assert(sq::wal_full::journal == sq::journal_mode::wal &&
              sq::wal_full::sync == sq::synchronous::full);
static_assert(std::is_same_v<co::durability_t<sq::upsert_sink<orders_flat>>, co::Synced>);
static_assert(std::is_same_v<co::durability_t<sq::append_sink<orders_flat>>, co::Synced>);

// SQLite's own default (DELETE + FULL) does not survive a power cut: Buffered.
static_assert(
    std::is_same_v<co::durability_t<sq::guarded_upsert_sink<orders_flat, sq::delete_full>>,
                   co::Buffered>);
static_assert(std::is_same_v<co::durability_t<sq::position_store<sq::delete_full>>, co::Buffered>);
static_assert(
    std::is_same_v<co::durability_t<sq::guarded_upsert_sink<orders_flat, sq::delete_extra>>,
                   co::Synced>);
static_assert(std::is_same_v<co::durability_t<sq::guarded_upsert_sink<orders_flat, sq::wal_normal>>,
                             co::Buffered>);

// A rollback journal with synchronous=NORMAL is not offered (no type names it).
static_assert(!sq::offered(sq::journal_mode::rollback_delete, sq::synchronous::normal));
static_assert(sq::offered(sq::journal_mode::wal, sq::synchronous::normal));

// Only a durability mode is accepted where one is expected.
static_assert(sq::durability_mode<sq::persist_extra>);
static_assert(!sq::durability_mode<co::Synced>);
static_assert(!sq::durability_mode<int>);

namespace {

// Every durability mode, with the name it has in the code and in docs/adapters.md.
struct mode_info {
  std::string_view name;
  sq::journal_mode journal;
  sq::synchronous sync;
  std::string_view declares;        // the mode's own durability
  std::string_view sink_declares;   // what a sink in this mode declares
  std::string_view store_declares;  // what a position store in this mode declares
};

template <class Mode>
mode_info info(std::string_view name) {
  return {name,
          Mode::journal,
          Mode::sync,
          Mode::durability::name,
          co::durability_t<sq::guarded_upsert_sink<orders_flat, Mode>>::name,
          co::durability_t<sq::position_store<Mode>>::name};
}

std::vector<mode_info> all_modes() {
  return {info<sq::wal_full>("wal_full"),           info<sq::wal_extra>("wal_extra"),
          info<sq::wal_normal>("wal_normal"),       info<sq::delete_extra>("delete_extra"),
          info<sq::delete_full>("delete_full"),     info<sq::truncate_extra>("truncate_extra"),
          info<sq::truncate_full>("truncate_full"), info<sq::persist_extra>("persist_extra"),
          info<sq::persist_full>("persist_full")};
}

constexpr std::array journals{sq::journal_mode::rollback_delete,
                              sq::journal_mode::rollback_truncate,
                              sq::journal_mode::rollback_persist, sq::journal_mode::wal};
constexpr std::array levels{sq::synchronous::normal, sq::synchronous::full, sq::synchronous::extra};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> split(std::string_view s, char by) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == by) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

template <class Mode>
void check_runs_as_declared(const scratch_dir& dir, std::string_view file) {
  CAPTURE(file);
  sq::guarded_upsert_sink<orders_flat, Mode> sink(dir / std::string(file));
  const sq::effective_durability got = sink.database().durability();
  CHECK(got.journal == sq::pragma_value(Mode::journal));
  CHECK(got.synchronous == sq::pragma_number(Mode::sync));
  // The store opens the same file in the same mode and reads the same back.
  sq::position_store<Mode> store(dir / std::string(file));
  store.commit(co::partition_id{0}, co::position{1});
  CHECK(store.load() == co::position{1});
}

}  // namespace

// ---- what runs -----------------------------------------------------------------------------

TEST_CASE("a default sink and store run WAL with synchronous=FULL") {
  scratch_dir dir;
  sq::guarded_upsert_sink<orders_flat> sink(dir / "db.sqlite");
  auto journal = sink.database().prepare("PRAGMA journal_mode");
  REQUIRE(journal.step());
  CHECK(journal.column_text(0) == "wal");
  auto sync = sink.database().prepare("PRAGMA synchronous");
  REQUIRE(sync.step());
  CHECK(sync.column_int64(0) == 2);  // FULL

  sq::position_store<> store(dir / "position.sqlite");
  store.commit(co::partition_id{0}, co::position{3});
  // What the store's file is in, seen from another connection: WAL is kept in the file.
  sq::guarded_upsert_sink<orders_flat> other(dir / "position.sqlite");
  CHECK(other.database().durability().journal == "wal");
}

TEST_CASE("every durability mode runs the journal mode and synchronous level it names") {
  scratch_dir dir;
  check_runs_as_declared<sq::wal_full>(dir, "wal_full.sqlite");
  check_runs_as_declared<sq::wal_extra>(dir, "wal_extra.sqlite");
  check_runs_as_declared<sq::wal_normal>(dir, "wal_normal.sqlite");
  check_runs_as_declared<sq::delete_extra>(dir, "delete_extra.sqlite");
  check_runs_as_declared<sq::delete_full>(dir, "delete_full.sqlite");
  check_runs_as_declared<sq::truncate_extra>(dir, "truncate_extra.sqlite");
  check_runs_as_declared<sq::truncate_full>(dir, "truncate_full.sqlite");
  check_runs_as_declared<sq::persist_extra>(dir, "persist_extra.sqlite");
  check_runs_as_declared<sq::persist_full>(dir, "persist_full.sqlite");
}

TEST_CASE("a connection that cannot run its durability mode is refused") {
  scratch_dir dir;
  const sq::sink_options quick{.busy_timeout = std::chrono::milliseconds{10}};
  SUBCASE("another connection holds the database in WAL") {
    sq::guarded_upsert_sink<orders_flat, sq::wal_full> wal(dir / "db.sqlite");
    // Leaving WAL needs the database to itself: SQLite keeps WAL, so DELETE's durability (and
    // declaration) would not be what runs.
    try {
      sq::guarded_upsert_sink<orders_flat, sq::delete_extra> refused(dir / "db.sqlite", quick);
      FAIL("a DELETE-mode sink opened a database that stays in WAL");
    } catch (const sq::durability_mismatch& e) {
      CHECK(e.wanted_journal() == sq::journal_mode::rollback_delete);
      CHECK(e.actual_journal() == "wal");
      CHECK(std::string(e.what()).find("journal_mode=wal") != std::string::npos);
    }
  }
  SUBCASE("the file system cannot share memory, so SQLite silently keeps DELETE") {
    spy_vfs no_shm(/*shared_memory=*/false);
    try {
      sq::guarded_upsert_sink<orders_flat> refused(dir / "db.sqlite", quick);
      FAIL("a WAL sink opened a database SQLite runs in DELETE mode");
    } catch (const sq::durability_mismatch& e) {
      CHECK(e.wanted_journal() == sq::journal_mode::wal);
      CHECK(e.actual_journal() == "delete");
      CHECK(e.actual_synchronous() == 2);
    }
    // The store is refused the same way; a mode the file system can run is accepted.
    CHECK_THROWS_AS(sq::position_store<>(dir / "db.sqlite"), sq::durability_mismatch);
    CHECK_THROWS_AS(sq::position_store<>(dir / "db.sqlite"), co::infrastructure_error);
    CHECK_NOTHROW(sq::guarded_upsert_sink<orders_flat, sq::delete_extra>(dir / "db.sqlite"));
  }
}

// ---- what the declared durability rests on: the syncs SQLite makes ---------------------------

TEST_CASE("Synced rests on a sync SQLite makes at every commit, which Buffered modes skip") {
  scratch_dir dir;
  constexpr int commits = 5;
  const auto write = [&](auto& sink) {
    for (int i = 0; i < commits; ++i) {
      sink.begin();
      sink.apply(co::partition_id{0}, co::offset{i}, order_event{i, 1, 1, 1});
      sink.store_position(co::partition_id{0}, co::position{i + 1});
      sink.commit();
    }
  };
  const auto journal_deletions = [](const spy_vfs& spy, bool sync_dir) {
    int n = 0;
    for (const auto& d : spy.deletions())
      n += d.path.ends_with("-journal") && d.sync_dir == sync_dir ? 1 : 0;
    return n;
  };

  SUBCASE("DELETE + EXTRA (Synced): each commit's unlink of the journal is synced") {
    spy_vfs spy;
    sq::guarded_upsert_sink<orders_flat, sq::delete_extra> sink(dir / "db.sqlite");
    spy.clear();
    write(sink);
    CHECK(journal_deletions(spy, true) == commits);
    CHECK(journal_deletions(spy, false) == 0);
  }
  SUBCASE("DELETE + FULL (Buffered): the unlink that commits is not synced") {
    spy_vfs spy;
    sq::guarded_upsert_sink<orders_flat, sq::delete_full> sink(dir / "db.sqlite");
    spy.clear();
    write(sink);
    CHECK(journal_deletions(spy, false) == commits);
    CHECK(journal_deletions(spy, true) == 0);
  }
  SUBCASE("WAL + FULL (Synced): the WAL is fsync'ed at every commit") {
    spy_vfs spy;
    sq::guarded_upsert_sink<orders_flat, sq::wal_full> sink(dir / "db.sqlite");
    spy.clear();
    write(sink);
    CHECK(spy.syncs(spy_vfs::file_kind::wal) >= commits);
  }
  SUBCASE("WAL + NORMAL (Buffered): commits leave the WAL unsynced until a checkpoint") {
    spy_vfs spy;
    sq::guarded_upsert_sink<orders_flat, sq::wal_normal> sink(dir / "db.sqlite");
    spy.clear();
    write(sink);
    CHECK(spy.syncs(spy_vfs::file_kind::wal) == 0);
  }
}

// ---- the table in docs/adapters.md ---------------------------------------------------------

TEST_CASE("docs/adapters.md's durability table says what the types say") {
  std::ifstream in(std::string(COMMIT_ORDER_SOURCE_DIR) + "/docs/adapters.md");
  REQUIRE(in);
  std::vector<std::vector<std::string>> rows;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("| journal_mode | synchronous |")) {
      in_table = true;
      continue;
    }
    if (!in_table)
      continue;
    if (!line.starts_with("|"))
      break;
    if (line.starts_with("|---"))
      continue;
    auto cells = split(std::string_view(line).substr(1, line.size() - 2), '|');
    REQUIRE(cells.size() == 5);
    rows.push_back(std::move(cells));
  }
  const std::vector<mode_info> modes = all_modes();
  REQUIRE(rows.size() >= modes.size());

  const std::set<std::string> journal_names{"DELETE", "TRUNCATE", "PERSIST", "WAL"};
  const std::set<std::string> sync_names{"NORMAL", "FULL", "EXTRA"};
  std::map<std::pair<std::string, std::string>, int> seen;  // each representable pair once
  std::set<std::string> types_seen;
  for (const auto& row : rows) {
    CAPTURE(row[0]);
    CAPTURE(row[1]);
    const auto expand = [](const std::string& cell, const std::set<std::string>& all_of,
                           std::vector<std::string> extra) {
      std::vector<std::string> out;
      if (cell == "any") {
        out.assign(all_of.begin(), all_of.end());
        out.insert(out.end(), extra.begin(), extra.end());
      } else {
        out = split(cell, ',');
      }
      return out;
    };
    const auto js = expand(row[0], journal_names, {"MEMORY", "OFF"});
    const auto ss = expand(row[1], sync_names, {"OFF"});
    const std::string& type = row[2];
    const std::string& declares = row[3];
    CHECK_FALSE(row[4].empty());  // every row gives its reason
    for (const auto& j : js) {
      for (const auto& s : ss) {
        if (!journal_names.contains(j) || !sync_names.contains(s)) {
          // Not even nameable in the code (no enumerator): the table must say refused.
          CHECK(declares == "refused");
          continue;
        }
        ++seen[{j, s}];
        const mode_info* mode = nullptr;
        for (const auto& m : modes) {
          if (upper(sq::pragma_value(m.journal)) == j && sq::pragma_value(m.sync) == s)
            mode = &m;
        }
        bool offered = false;
        for (const auto jm : journals)
          for (const auto sm : levels)
            if (upper(sq::pragma_value(jm)) == j && sq::pragma_value(sm) == s)
              offered = sq::offered(jm, sm);
        if (!offered) {
          CHECK(mode == nullptr);
          CHECK(declares == "refused");
          CHECK(type == "—");
          continue;
        }
        REQUIRE(mode != nullptr);
        std::string named = "`sqlite::";
        named.append(mode->name).append("`");
        CHECK((type == named || type == named + " (default)"));
        CHECK(declares == mode->declares);
        CHECK(mode->sink_declares == mode->declares);
        CHECK(mode->store_declares == mode->declares);
        if (type.ends_with("(default)"))
          CHECK(mode->name == "wal_full");
        types_seen.insert(std::string(mode->name));
      }
    }
  }
  // Every representable combination has exactly one row, and every type appears.
  for (const auto& j : journal_names)
    for (const auto& s : sync_names) {
      CAPTURE(j);
      CAPTURE(s);
      CHECK(seen[{j, s}] == 1);
    }
  CHECK(types_seen.size() == modes.size());
}
