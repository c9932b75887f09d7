// SPDX-License-Identifier: BSL-1.0
// The conformance fixtures of the SQLite adapter: one of its sinks (guarded upsert, upsert,
// append) in durability mode `Durability`, and its position store in the same mode, each in a
// database of its own (a separate store is what AtMostOnce and AtLeastOnce are for; in one
// database the store's syncs would also cover the sink's and could hide a missing one).
//
// The source is a memory::log declared as durable as the mode (rule R9c asks that much of a
// source): a stand-in that only feeds the sink, whose own capabilities the kit does not check.
// `Power` is the power-cut facility (power_loss tests), or no_power. `Sink` is the adapter's
// sink for the mode, unless a test gives one of its own (one that lies about its durability).

#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/kit_rows.hpp"
#include "conformance/storage.hpp"

namespace conformance {

namespace co = commit_order;

template <class Mode, class Durability = sq::wal_full, class Power = no_power,
          class Sink = sq::table_sink<kit_rows, Mode, Durability>>
class sqlite_fixture {
 public:
  using event_type = kit_event;
  using source_type = co::memory::log<kit_event, typename Durability::durability>;
  using sink_type = Sink;
  using store_type = sq::position_store<Durability>;
  static constexpr bool source_is_stand_in = true;

  /// Fresh storage: copies of two empty databases made once per process (creating a database
  /// in WAL mode syncs a dozen times; the kit makes one per scenario).
  sqlite_fixture() : power_(dir_.path()) {
    const auto& empty = empty_databases();
    std::filesystem::create_directories(dir_ / "db");
    std::filesystem::create_directories(dir_ / "state");
    std::filesystem::copy_file(empty / "sink.db", dir_ / "db" / "sink.db");
    std::filesystem::copy_file(empty / "positions.db", dir_ / "state" / "positions.db");
  }

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }

  void create_log(std::span<const kit_event> events) {
    for (const auto& e : events)
      log_.append(e);
  }
  source_type& source() { return log_; }
  sink_type& sink() {
    if (!sink_) {
      sink_.emplace(dir_ / "db" / "sink.db");
      close_like_a_kill(sink_->database());
    }
    return *sink_;
  }
  store_type& store() {
    if (!store_) {
      store_.emplace(dir_ / "state" / "positions.db");
      close_like_a_kill(store_->database());
    }
    return *store_;
  }
  void close() {
    sink_.reset();
    store_.reset();
  }
  void truncate_before(co::position p) { log_.truncate_before(p); }

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
  // Created by the adapter itself (tables included), closed normally (no WAL is left beside
  // them), and removed when the process ends.
  static const std::filesystem::path& empty_databases() {
    static const storage_dir dir;
    static const bool made = [] {
      { sink_type sink(dir / "sink.db"); }
      { store_type store(dir / "positions.db"); }
      return true;
    }();
    (void)made;
    return dir.path();
  }

  storage_dir dir_;
  power_slot<Power> power_;
  source_type log_;
  std::optional<sink_type> sink_;
  std::optional<store_type> store_;
};

}  // namespace conformance
