// SPDX-License-Identifier: BSL-1.0
// The conformance fixture of the file adapter: file::log as the source (fsync'ed on every
// append: Synced) with file::position_store as the store, feeding the SQLite guarded upsert sink
// in its default durability mode (wal_full: Synced) — the configuration the crash lab runs.
// Segments hold three records, so retention deletes whole segments that a reader can lag
// behind. `Power` is the power-cut facility (power_loss tests), or no_power.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/kit_rows.hpp"
#include "conformance/storage.hpp"

namespace conformance {

namespace co = commit_order;

template <class Power = no_power>
class file_fixture {
 public:
  using event_type = kit_event;
  using source_type = co::file::log<kit_event>;
  using sink_type = sq::guarded_upsert_sink<kit_rows>;
  using store_type = co::file::position_store;

  /// A 16-byte header and frames of 8 + 16 bytes: three records per segment.
  static co::file::log_options log_options() {
    return co::file::log_options{.segment_bytes = 16 + 3 * 24};
  }

  file_fixture() : power_(dir_.path()) {
    std::filesystem::create_directories(dir_ / "db");
    std::filesystem::create_directories(dir_ / "state");
  }

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }

  /// Written as a producer would (buffered, one flush at the end), after which every record is
  /// as durable as the source declares.
  void create_log(std::span<const kit_event> events) {
    log_.reset();
    co::file::log<kit_event, co::file::trivial_codec<kit_event>, co::file::sync_on_flush> producer(
        dir_ / "log", log_options());
    for (const auto& e : events)
      producer.append(e);
    producer.flush();
  }
  source_type& source() {
    if (!log_)
      log_.emplace(dir_ / "log", log_options());
    return *log_;
  }
  sink_type& sink() {
    if (!sink_) {
      sink_.emplace(dir_ / "db" / "sink.db");
      close_like_a_kill(sink_->database());
    }
    return *sink_;
  }
  store_type& store() {
    if (!store_)
      store_.emplace(dir_ / "state" / "position");
    return *store_;
  }
  void close() {
    log_.reset();
    sink_.reset();
    store_.reset();
  }
  /// Retention on the open log: its reader stays where it is.
  void truncate_before(co::position p) { source().truncate_before(p); }
  co::offset append(const kit_event& e) { return source().append(e); }

  std::vector<co::testing::observed_row<kit_event>> rows() {
    std::vector<co::testing::observed_row<kit_event>> out;
    auto q = sink().database().prepare("SELECT k, seq, source_offset FROM kit_rows ORDER BY rowid");
    while (q.step()) {
      const kit_event e{q.column_int64(0), q.column_int64(1)};
      out.push_back({e.key, co::offset{q.column_int64(2)}, e});
    }
    return out;
  }

  Power& power() requires(!std::is_same_v<Power, no_power>) { return power_.power; }

 private:
  storage_dir dir_;
  power_slot<Power> power_;
  std::optional<source_type> log_;
  std::optional<sink_type> sink_;
  std::optional<store_type> store_;
};

}  // namespace conformance
