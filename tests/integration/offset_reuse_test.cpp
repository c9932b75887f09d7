// SPDX-License-Identifier: BSL-1.0
// A source that forgets records behind a stored position and gives their offsets to new
// records: the types cannot see it when the source claims more durability than it has (a disk
// that acknowledged a sync it did not do, a log restored from an old copy). The position is
// stored with the fingerprint of the record it follows, and recovery compares it with the
// record now at that offset.
#include <doctest/doctest.h>

#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace co = commit_order;
using test_support::scratch_dir;

namespace {

struct reading {
  std::int64_t sensor = 0;
  std::int64_t value = 0;
};

using reading_log = co::file::log<reading>;
using readings_table =
    co::memory::table<reading, co::key<&reading::sensor>,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Synced>>;
using pipeline_t = co::pipeline<reading_log, readings_table, co::AtLeastOnce<>,
                                co::with_store<co::file::position_store>>;

static_assert(co::fingerprinted_source<reading_log>);
static_assert(co::fingerprint_store<co::file::position_store>);
static_assert(co::fingerprinting_position_store<co::memory::position_store<>>);

void write_log(const std::filesystem::path& dir, std::int64_t n, std::int64_t salt) {
  std::filesystem::remove_all(dir);
  reading_log log(dir);
  for (std::int64_t i = 0; i < n; ++i)
    log.append(reading{i % 3, i * 10 + salt});
}

}  // namespace

TEST_CASE("a position is stored with the fingerprint of the record it follows") {
  scratch_dir dir;
  write_log(dir / "log", 10, 0);
  readings_table table;
  co::file::position_store store(dir / "position");
  {
    reading_log log(dir / "log");
    pipeline_t p(log, table, store, co::settings{.batch_size = 4});
    CHECK(p.run() == 10);
  }
  CHECK(store.load() == co::position{10});
  REQUIRE(store.load_fingerprint().has_value());
  reading_log log(dir / "log");
  CHECK(store.load_fingerprint() == log.fingerprint_at(co::offset{9}));
}

TEST_CASE("recovery refuses to resume after a record the source no longer has at its offset") {
  scratch_dir dir;
  write_log(dir / "log", 10, 0);
  readings_table table;
  co::file::position_store store(dir / "position");
  {
    reading_log log(dir / "log");
    pipeline_t p(log, table, store, co::settings{.batch_size = 4});
    CHECK(p.run() == 10);
  }
  SUBCASE("the same records: the check passes") {
    write_log(dir / "log", 12, 0);
    reading_log log(dir / "log");
    pipeline_t p(log, table, store);
    CHECK(p.recover() == co::position{10});
    CHECK(p.run() == 2);
  }
  SUBCASE("other records at the same offsets: offset_reused, nothing skipped") {
    // The log lost its records and was refilled: offsets 0..11 now hold other readings.
    // Resuming at 10 would skip ten records that never reached the sink.
    write_log(dir / "log", 12, 1);
    reading_log log(dir / "log");
    pipeline_t p(log, table, store);
    try {
      p.recover();
      FAIL("recovery resumed after a record that is not the one the position followed");
    } catch (const co::offset_reused& e) {
      CHECK(e.at() == co::offset{9});
    }
    CHECK(store.load() == co::position{10});  // untouched
  }
  SUBCASE("a position written without a fingerprint is not checked") {
    store.commit(co::position{10});
    CHECK_FALSE(store.load_fingerprint().has_value());
    write_log(dir / "log", 12, 1);
    reading_log log(dir / "log");
    pipeline_t p(log, table, store);
    CHECK(p.recover() == co::position{10});
  }
}

TEST_CASE("a position in the SQLite sink's transaction is checked against the log's record") {
  // TransactionalPosition keeps the position in the sink, not in a store: the sink keeps the
  // fingerprint beside it, and the claim compares it with the record now before it.
  using orders_t = co::sqlite::guarded_upsert_sink<crash_lab::orders_flat>;
  using log_t = crash_lab::order_log;
  using tx_pipeline_t = co::pipeline<log_t, orders_t, co::TransactionalPosition<>>;
  static_assert(co::fingerprinting_sink<orders_t>);
  scratch_dir dir;
  const auto write_orders = [&](std::int64_t n, std::int64_t salt) {
    std::filesystem::remove_all(dir / "log");
    log_t log(dir / "log", crash_lab::lab_log_options());
    for (std::int64_t i = 0; i < n; ++i)
      log.append(crash_lab::order_event{i % 5, salt, i, 1 + i});
  };
  write_orders(10, 0);
  orders_t sink(dir / "orders.sqlite");
  {
    log_t log(dir / "log", crash_lab::lab_log_options());
    tx_pipeline_t p(log, sink, co::settings{.batch_size = 4});
    CHECK(p.run() == 10);
  }
  SUBCASE("the same records: the check passes and only the new ones are read") {
    write_orders(12, 0);
    log_t log(dir / "log", crash_lab::lab_log_options());
    tx_pipeline_t p(log, sink);
    CHECK(p.recover() == co::position{10});
    CHECK(p.run() == 2);
  }
  SUBCASE("other records at the same offsets: offset_reused, the claim rolled back") {
    write_orders(12, 7);
    log_t log(dir / "log", crash_lab::lab_log_options());
    tx_pipeline_t p(log, sink);
    try {
      p.recover();
      FAIL("recovery resumed after a record that is not the one the position followed");
    } catch (const co::offset_reused& e) {
      CHECK(e.at() == co::offset{9});
      CHECK(e.stored() == co::position{10});
    }
    CHECK(sink.load_position() == co::position{10});
    CHECK_THROWS_AS(p.run(), co::offset_reused);  // every attempt, never a skip
  }
}

TEST_CASE("a file log's position in a SQLite position store is checked against its record") {
  // AtLeastOnce with the position in a store of the sink's database: the store keeps the
  // fingerprint beside partition 0's position (fingerprinting_position_store), as the file
  // position store keeps it beside its one position.
  using orders_t = co::sqlite::guarded_upsert_sink<crash_lab::orders_flat>;
  using store_t = co::sqlite::position_store<>;
  using log_t = crash_lab::order_log;
  using al_pipeline_t = co::pipeline<log_t, orders_t, co::AtLeastOnce<>, co::with_store<store_t>>;
  static_assert(co::fingerprinting_position_store<store_t>);
  scratch_dir dir;
  const auto write_orders = [&](std::int64_t n, std::int64_t salt) {
    std::filesystem::remove_all(dir / "log");
    log_t log(dir / "log", crash_lab::lab_log_options());
    for (std::int64_t i = 0; i < n; ++i)
      log.append(crash_lab::order_event{i % 5, salt, i, 1 + i});
  };
  write_orders(10, 0);
  orders_t sink(dir / "orders.sqlite");
  store_t store(sink);
  {
    log_t log(dir / "log", crash_lab::lab_log_options());
    al_pipeline_t p(log, sink, store, co::settings{.batch_size = 4});
    CHECK(p.run() == 10);
  }
  REQUIRE(store.load() == co::position{10});
  REQUIRE(store.loaded_fingerprint().has_value());
  SUBCASE("the same records: only the new ones are read") {
    write_orders(12, 0);
    log_t log(dir / "log", crash_lab::lab_log_options());
    al_pipeline_t p(log, sink, store);
    CHECK(p.recover() == co::position{10});
    CHECK(p.run() == 2);
  }
  SUBCASE("other records at the same offsets: offset_reused") {
    write_orders(12, 7);
    log_t log(dir / "log", crash_lab::lab_log_options());
    al_pipeline_t p(log, sink, store);
    CHECK_THROWS_AS(p.recover(), co::offset_reused);
    CHECK(store.load() == co::position{10});
  }
}

TEST_CASE("the file position store still reads its first format") {
  scratch_dir dir;
  // "copos001" | position 42 | CRC-32 of the first 16 bytes, as the first format wrote it.
  {
    co::file::position_store store(dir / "position");
    store.commit(co::position{42});
  }
  // Rewrite it in the first format by hand.
  std::array<unsigned char, 20> old{'c', 'o', 'p', 'o', 's', '0', '0', '1', 42};
  const std::uint32_t crc =
      static_cast<std::uint32_t>(::crc32_z(0, reinterpret_cast<const Bytef*>(old.data()), 16));
  for (int i = 0; i < 4; ++i)
    old[static_cast<std::size_t>(16 + i)] = static_cast<unsigned char>((crc >> (8 * i)) & 0xffU);
  {
    std::FILE* f = std::fopen((dir / "position").c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(old.data(), 1, old.size(), f);
    std::fclose(f);
  }
  co::file::position_store store(dir / "position");
  CHECK(store.load() == co::position{42});
  CHECK_FALSE(store.load_fingerprint().has_value());
}
