// SPDX-License-Identifier: BSL-1.0
// Pay only for the SQL: in steady state, writing records through a real pipeline into a SQLite
// sink allocates nothing per record -- no diagnostic string built before a return code is
// checked, no statement prepared again per batch.
//
// This executable replaces the global operator new/delete (every allocation of C++ code in it
// is counted), and wraps SQLite's allocator before SQLite starts (every allocation SQLite makes
// for the adapter's calls is counted as well: re-preparing BEGIN/COMMIT through sqlite3_exec
// shows there).
#include <doctest/doctest.h>

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace {
std::atomic<std::size_t> cxx_allocations{0};
std::atomic<std::size_t> sqlite_allocations{0};

void* allocate(std::size_t n) {
  cxx_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n))
    return p;
  throw std::bad_alloc();
}
void* allocate_aligned(std::size_t n, std::align_val_t a) {
  cxx_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(a);
  const std::size_t size = (n + align - 1) / align * align;
  if (void* p = std::aligned_alloc(align, size == 0 ? align : size))
    return p;
  throw std::bad_alloc();
}

// SQLite's allocator, wrapped before sqlite3_initialize() can run (a static initializer runs
// before main, and nothing in this program touches SQLite before main).
sqlite3_mem_methods sqlite_default{};
void* sqlite_malloc(int n) {
  sqlite_allocations.fetch_add(1, std::memory_order_relaxed);
  return sqlite_default.xMalloc(n);
}
void* sqlite_realloc(void* p, int n) {
  sqlite_allocations.fetch_add(1, std::memory_order_relaxed);
  return sqlite_default.xRealloc(p, n);
}
const bool sqlite_counted = [] {
  if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sqlite_default) != SQLITE_OK)
    return false;
  sqlite3_mem_methods counted = sqlite_default;
  counted.xMalloc = &sqlite_malloc;
  counted.xRealloc = &sqlite_realloc;
  return sqlite3_config(SQLITE_CONFIG_MALLOC, &counted) == SQLITE_OK;
}();
}  // namespace

// NOLINTBEGIN(misc-new-delete-overloads): every form is replaced, each counts or frees.
void* operator new(std::size_t n) {
  return allocate(n);
}
void* operator new[](std::size_t n) {
  return allocate(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t a) {
  return allocate_aligned(n, a);
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return allocate_aligned(n, a);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
// NOLINTEND(misc-new-delete-overloads)

namespace co = commit_order;
namespace sq = commit_order::sqlite;
using crash_lab::order_event;
using crash_lab::orders_flat;
using test_support::scratch_dir;

namespace {

constexpr std::int64_t orders = 16;  // keys repeat: the table stops growing after the warm-up
// Small enough that the WAL stays within its first wal-index block (4096 frames), whose growth
// would allocate inside SQLite.
constexpr std::size_t warm_up_records = 256;
constexpr std::size_t measured_records = 512;

co::memory::log<order_event, co::Synced> make_log() {
  co::memory::log<order_event, co::Synced> log;
  const auto total = static_cast<std::int64_t>(warm_up_records + measured_records);
  for (std::int64_t i = 0; i < total; ++i)
    log.append(order_event{i % orders, 100 + i % orders, i, i / orders + 1});
  return log;
}

struct counts {
  std::size_t cxx = 0;
  std::size_t sqlite = 0;
};

// Warms the pipeline up (statements prepared, pages cached), then counts the allocations of
// the next `measured_records` records.
template <class Pipeline>
counts measure(Pipeline& p) {
  std::size_t done = 0;
  while (done < warm_up_records)
    done += p.poll_once();
  REQUIRE(done == warm_up_records);
  const std::size_t cxx_before = cxx_allocations.load();
  const std::size_t sqlite_before = sqlite_allocations.load();
  std::size_t measured = 0;
  while (measured < measured_records) {
    const std::size_t n = p.poll_once();
    REQUIRE(n != 0);
    measured += n;
  }
  counts c{cxx_allocations.load() - cxx_before, sqlite_allocations.load() - sqlite_before};
  REQUIRE(measured == measured_records);
  return c;
}

// The WAL is checkpointed into the database every 1000 pages by default, and a checkpoint
// allocates inside SQLite whoever drives it: that is the SQL's cost, not the adapter's, so the
// measured window holds no checkpoint.
void no_auto_checkpoint(sq::connection& db) {
  db.exec("PRAGMA wal_autocheckpoint = 0");
}

}  // namespace

TEST_CASE("SQLite's allocator is counted") {
  REQUIRE(sqlite_counted);
}

namespace {

// The hand-written twin: the same statements, in the same order, on the same kind of connection,
// through the C API. What SQLite allocates for it is the SQL's cost; the adapter may add none.
class raw_statement final {
 public:
  raw_statement(sqlite3* db, const std::string& sql) {
    REQUIRE(sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) ==
            SQLITE_OK);
  }
  raw_statement(const raw_statement&) = delete;
  raw_statement& operator=(const raw_statement&) = delete;
  ~raw_statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() const noexcept { return stmt_; }
  void run() {
    const int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    REQUIRE(rc == SQLITE_DONE);
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Partition 0's row of the stream's positions, written only while the row's owner is ours
// (the claim made the row: an owner's write only updates it).
const std::string position_sql =
    "UPDATE \"commit_order_positions\" SET position = ?4 WHERE stream = ?1 AND topic = ?2 AND"
    " \"partition\" = ?3 AND owner_epoch = ?5";

// A position store's write: bound to the data table the pipeline's sink names.
const std::string bound_position_sql =
    "INSERT INTO \"commit_order_positions\" (stream, topic, \"partition\", position, owner_epoch,"
    " bound_to) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (stream, topic, \"partition\") DO"
    " UPDATE SET position = excluded.position, bound_to = excluded.bound_to WHERE"
    " \"commit_order_positions\".owner_epoch = excluded.owner_epoch AND"
    " (\"commit_order_positions\".bound_to IS NULL OR \"commit_order_positions\".bound_to IS"
    " excluded.bound_to)";

void write_row(raw_statement& w, const order_event& e, std::int64_t at) {
  sqlite3_bind_int64(w.get(), 1, e.order_id);
  sqlite3_bind_int64(w.get(), 2, e.customer_id);
  sqlite3_bind_int64(w.get(), 3, e.total_cents);
  sqlite3_bind_int64(w.get(), 4, e.event_seq);
  sqlite3_bind_int64(w.get(), 5, at);  // source_offset
  sqlite3_bind_int64(w.get(), 6, 0);   // source_partition
  w.run();
}

void store_position(raw_statement& p, std::int64_t at, std::int64_t owner_epoch) {
  sqlite3_bind_text(p.get(), 1, "default", -1, SQLITE_STATIC);
  sqlite3_bind_text(p.get(), 2, "", -1, SQLITE_STATIC);
  sqlite3_bind_int64(p.get(), 3, 0);
  sqlite3_bind_int64(p.get(), 4, at);
  sqlite3_bind_int64(p.get(), 5, owner_epoch);
  p.run();
}

// Runs `unit(first, end)` over the log in batches: the warm-up, then the measured records.
template <class Unit>
counts measure_handwritten(std::size_t batch, Unit unit) {
  std::size_t at = 0;
  const auto run_until = [&](std::size_t end) {
    while (at < end) {
      const std::size_t n = std::min(batch, end - at);
      unit(at, at + n);
      at += n;
    }
  };
  run_until(warm_up_records);
  const std::size_t cxx_before = cxx_allocations.load();
  const std::size_t sqlite_before = sqlite_allocations.load();
  run_until(warm_up_records + measured_records);
  return {cxx_allocations.load() - cxx_before, sqlite_allocations.load() - sqlite_before};
}

using sink_t = sq::guarded_upsert_sink<orders_flat>;
using store_t = sq::position_store<>;
using log_t = co::memory::log<order_event, co::Synced>;

counts handwritten_transactional(std::size_t batch) {
  scratch_dir dir;
  const log_t log = make_log();
  sink_t tables(dir / "db.sqlite");  // the same schema and pragmas; the loop below is raw
  no_auto_checkpoint(tables.database());
  sqlite3* db = tables.database().get();
  raw_statement begin(db, "BEGIN IMMEDIATE");
  raw_statement commit(db, "COMMIT");
  raw_statement write(db, tables.write_statement().sql());
  raw_statement position(db, position_sql);
  // The pipeline claims partition 0 when it recovers (fencing is on by default) and then
  // stores its positions as epoch 1: so does the twin, so both write the same position row.
  tables.begin();
  REQUIRE(tables.claim_next(co::partition_id{0}).owner == co::epoch{1});
  tables.commit();
  const auto records = log.records();
  return measure_handwritten(batch, [&](std::size_t first, std::size_t end) {
    begin.run();
    for (std::size_t i = first; i < end; ++i)
      write_row(write, records[i].event, records[i].source_offset.value());
    store_position(position, static_cast<std::int64_t>(end), 1);
    commit.run();
  });
}

counts handwritten_at_least_once(std::size_t batch) {
  scratch_dir dir;
  const log_t log = make_log();
  sink_t tables(dir / "db.sqlite");
  store_t positions(dir / "db.sqlite");
  no_auto_checkpoint(tables.database());
  no_auto_checkpoint(positions.database());
  raw_statement write(tables.database().get(), tables.write_statement().sql());
  raw_statement position(positions.database().get(), bound_position_sql);
  sqlite3_bind_text(position.get(), 6, "'orders_flat'", -1, SQLITE_STATIC);
  const auto records = log.records();
  return measure_handwritten(batch, [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i)
      write_row(write, records[i].event, records[i].source_offset.value());
    store_position(position, static_cast<std::int64_t>(end), 0);
  });
}

}  // namespace

TEST_CASE("TransactionalPosition into a guarded upsert sink: 0 allocations per record") {
  for (const std::size_t batch : {std::size_t{1}, std::size_t{64}, std::size_t{256}}) {
    CAPTURE(batch);
    counts c;
    {
      scratch_dir dir;
      auto log = make_log();
      sink_t sink(dir / "db.sqlite");
      no_auto_checkpoint(sink.database());
      co::pipeline<log_t, sink_t, co::TransactionalPosition<>> p(log, sink,
                                                                 co::settings{.batch_size = batch});
      c = measure(p);
      CHECK(sink.load_position() ==
            co::position{static_cast<std::int64_t>(warm_up_records + measured_records)});
    }
    const counts twin = handwritten_transactional(batch);
    CHECK(c.cxx == 0);
    CHECK(twin.cxx == 0);
    // SQLite's own allocations (its page cache, the upsert's records) are the SQL's: the same
    // as the hand-written loop's, none added by the adapter.
    CHECK(c.sqlite == twin.sqlite);
    MESSAGE("batch " << batch << ": SQLite allocates " << c.sqlite << " times in "
                     << measured_records << " records through the adapter, " << twin.sqlite
                     << " times through the hand-written loop");
  }
}

TEST_CASE("AtLeastOnce with the SQLite position store: 0 allocations per record") {
  for (const std::size_t batch : {std::size_t{1}, std::size_t{64}, std::size_t{256}}) {
    CAPTURE(batch);
    counts c;
    {
      scratch_dir dir;
      auto log = make_log();
      sink_t sink(dir / "db.sqlite");
      store_t store(dir / "db.sqlite");
      no_auto_checkpoint(sink.database());
      no_auto_checkpoint(store.database());
      co::pipeline<log_t, sink_t, co::AtLeastOnce<>, co::with_store<store_t>> p(
          log, sink, store, co::settings{.batch_size = batch});
      c = measure(p);
      CHECK(store.load() ==
            co::position{static_cast<std::int64_t>(warm_up_records + measured_records)});
    }
    const counts twin = handwritten_at_least_once(batch);
    CHECK(c.cxx == 0);
    CHECK(twin.cxx == 0);
    CHECK(c.sqlite == twin.sqlite);
    MESSAGE("batch " << batch << ": SQLite allocates " << c.sqlite << " times in "
                     << measured_records << " records through the adapter, " << twin.sqlite
                     << " times through the hand-written loop");
  }
}

TEST_CASE("the counter counts: a failing write allocates its message") {
  // The control: without it a broken counter would pass the tests above.
  scratch_dir dir;
  sq::guarded_upsert_sink<orders_flat> sink(dir / "db.sqlite");
  const std::size_t before = cxx_allocations.load();
  CHECK_THROWS(sink.commit());  // no transaction: a logic_error with a message
  CHECK(cxx_allocations.load() > before);
  const std::size_t sqlite_before = sqlite_allocations.load();
  sink.database().exec("CREATE TABLE IF NOT EXISTS t (x)");  // SQLite compiles this text
  CHECK(sqlite_allocations.load() > sqlite_before);
}
