// SPDX-License-Identifier: BSL-1.0
// Adapters that break what they declare, each in one way, for the kit's own tests: the kit must
// fail every one of them on the check that covers the broken promise (and pass the honest twin).
//
// They keep their state in memory, in a fixture whose close() is a process crash: a part that
// has a `crash()` member loses there whatever it had not made durable.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/kit_event.hpp"

namespace conformance::broken {

namespace co = commit_order;
using rows_t = std::vector<co::testing::observed_row<kit_event>>;

template <class Table>
rows_t rows_of(const Table& t) {
  rows_t out;
  t.for_each([&](const auto& r) { out.push_back({r.row.key, r.source_offset, r.row}); });
  return out;
}

/// Declares Idempotent, but appends: a replay adds a row.
struct appending_idempotent_sink {
  using row_type = kit_event;
  using key_type = kit_key;
  using capabilities = co::capabilities<co::Idempotent, co::Volatile>;
  void apply(co::offset o, const kit_event& e) { table.apply(co::partition_id{0}, o, e); }
  rows_t rows() const { return rows_of(table); }
  co::memory::table<kit_event, co::no_key, co::capabilities<>> table;
};

/// Declares OffsetGuarded, but the last writer wins (and it says `applied` every time).
struct unguarded_sink {
  using row_type = kit_event;
  using key_type = kit_key;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::Volatile>;
  co::write_outcome apply(co::offset o, const kit_event& e) {
    return table.apply(co::partition_id{0}, o, e);
  }
  rows_t rows() const { return rows_of(table); }
  co::memory::table<kit_event, kit_key, co::capabilities<co::Idempotent>> table;
};

/// The same, but its apply reports nothing (like a sink that sends a unit's rows at commit):
/// the kit cannot count what the guard absorbed, and must still see older rows win.
struct silent_unguarded_sink {
  using row_type = kit_event;
  using key_type = kit_key;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::Volatile>;
  void apply(co::offset o, const kit_event& e) { table.apply(co::partition_id{0}, o, e); }
  rows_t rows() const { return rows_of(table); }
  co::memory::table<kit_event, kit_key, co::capabilities<co::Idempotent>> table;
};

/// Declares Idempotent only, but guards its upsert on the source offset and reports the
/// replays it keeps out as absorbed: `absorbed` says the offset guard kept a newer row, which a
/// sink without one cannot say.
struct secretly_guarded_sink {
  using row_type = kit_event;
  using key_type = kit_key;
  using capabilities = co::capabilities<co::Idempotent, co::Volatile>;
  co::write_outcome apply(co::offset o, const kit_event& e) {
    return table.apply(co::partition_id{0}, o, e);
  }
  rows_t rows() const { return rows_of(table); }
  co::memory::table<kit_event, kit_key, co::capabilities<co::Idempotent, co::OffsetGuarded>> table;
};

/// Declares Transactional, but its rows are durable as they are applied: a rollback drops the
/// staged position and keeps the rows.
struct leaky_rollback_sink {
  using row_type = kit_event;
  using key_type = kit_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Volatile>;
  co::write_outcome apply(co::offset o, const kit_event& e) {
    return table.apply(co::partition_id{0}, o, e);
  }
  void begin() { staged.reset(); }
  void store_position(co::position p) { staged = p; }
  void commit() {
    if (staged)
      stored = staged;
  }
  void rollback() { staged.reset(); }
  [[nodiscard]] std::optional<co::position> load_position() const { return stored; }
  rows_t rows() const { return rows_of(table); }
  co::memory::table<kit_event, kit_key, co::capabilities<co::Idempotent, co::OffsetGuarded>> table;
  std::optional<co::position> staged;
  std::optional<co::position> stored;
};

/// Declares Buffered (survives a process crash) but keeps only every other commit: a crash
/// brings back the one before.
struct forgetful_store {
  using capabilities = co::capabilities<co::Buffered>;
  [[nodiscard]] std::optional<co::position> load() const { return visible; }
  void commit(co::position p) {
    visible = p;
    if (++commits % 2 == 0)
      kept = p;
  }
  void crash() { visible = kept; }
  std::optional<co::position> visible;
  std::optional<co::position> kept;
  int commits = 0;
};

/// A log whose reader, overtaken by retention, jumps to what is left (the file log's old bug).
class jumping_log {
 public:
  using record_type = co::logged<kit_event>;
  using capabilities = co::capabilities<co::Volatile>;
  co::offset append(const kit_event& e) { return log_.append(e); }
  void seek(co::position p) { reader_.seek(p); }
  std::span<const record_type> poll(std::size_t n) {
    if (reader_.read_position() < log_.earliest())
      reader_.seek(log_.earliest());  // the bug: records between are skipped without a word
    return reader_.poll(n);
  }
  [[nodiscard]] co::position earliest() const { return log_.earliest(); }
  [[nodiscard]] co::position end() const { return log_.end(); }
  void truncate_before(co::position p) { log_.truncate_before(p); }

  jumping_log() = default;
  jumping_log(const jumping_log&) = delete;
  jumping_log& operator=(const jumping_log&) = delete;

 private:
  co::memory::log<kit_event> log_;
  co::memory::log<kit_event>::reader reader_{log_};
};

/// A log that hands out each batch's records last first: a partition's records no longer come
/// in offset order.
class reversing_log {
 public:
  using record_type = co::logged<kit_event>;
  using capabilities = co::capabilities<co::Volatile>;
  co::offset append(const kit_event& e) { return log_.append(e); }
  void seek(co::position p) { log_.seek(p); }
  std::vector<record_type> poll(std::size_t n) {
    const auto batch = log_.poll(n);
    return {batch.rbegin(), batch.rend()};
  }
  [[nodiscard]] co::position earliest() const { return log_.earliest(); }
  [[nodiscard]] co::position end() const { return log_.end(); }
  void truncate_before(co::position p) { log_.truncate_before(p); }

 private:
  co::memory::log<kit_event> log_;
};

// ---- a disk that can lose power, for the Synced check ---------------------------------------

/// Counts sync points; armed at n, the power goes out at the n-th (that sync, and every later
/// one, makes nothing durable).
struct sim_disk {
  std::uint64_t syncs = 0;
  std::uint64_t cut_at = 0;
  bool out = false;
  /// One sync point: true when it made something durable.
  bool sync() {
    ++syncs;
    if (cut_at != 0 && syncs == cut_at)
      out = true;
    return !out;
  }
};

/// A position store on a sim_disk, declared Synced. `SyncEvery` 1 syncs every commit (honest);
/// 2 acknowledges every other commit before it is synced (a Synced claim that is not true).
template <int SyncEvery>
struct disk_store {
  using capabilities = co::capabilities<co::Synced>;
  [[nodiscard]] std::optional<co::position> load() const { return visible; }
  void commit(co::position p) {
    visible = p;
    if (++commits % SyncEvery == 0 && disk->sync())
      durable = visible;
  }
  void power_cut() { visible = durable; }
  sim_disk* disk = nullptr;
  std::optional<co::position> visible;
  std::optional<co::position> durable;
  int commits = 0;
};

/// The power-cut facility over a sim_disk and the one part on it.
template <class Part>
struct sim_power {
  sim_disk* disk;
  Part* part;
  void watch() {
    *disk = sim_disk{};
    part->durable = part->visible;
  }
  void arm(std::uint64_t n) { disk->cut_at = n; }
  [[nodiscard]] std::uint64_t syncs() const { return disk->syncs; }
  [[nodiscard]] bool is_out() const { return disk->out; }
  void restore() {
    disk->out = true;
    part->power_cut();
    watch();
  }
};

// ---- the fixture -------------------------------------------------------------------------------

/// Memory storage for a sink, a store and a source, any of which may be broken. The sink reads
/// its rows back with rows(). With a Store on a sim_disk, the fixture has power().
template <class Sink, class Store = co::memory::position_store<>,
          class Log = co::memory::log<kit_event>>
class fixture {
 public:
  using event_type = kit_event;
  using source_type = Log;
  using sink_type = Sink;
  using store_type = Store;

  fixture() {
    if constexpr (requires { store_.disk; })
      store_.disk = &disk_;
  }

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }
  void create_log(std::span<const kit_event> events) {
    for (const auto& e : events)
      log_.append(e);
  }
  source_type& source() { return log_; }
  sink_type& sink() { return sink_; }
  store_type& store() { return store_; }
  void close() {
    if constexpr (requires { store_.crash(); })
      store_.crash();
  }
  void truncate_before(co::position p) { log_.truncate_before(p); }
  rows_t rows() { return sink_.rows(); }

  auto& power() requires requires(Store s) { s.power_cut(); }
  {
    power_.disk = &disk_;
    power_.part = &store_;
    return power_;
  }

 private:
  sim_disk disk_;
  Log log_;
  Sink sink_;
  Store store_;
  sim_power<Store> power_{};
};

/// An honest memory sink (declared durability `D`), for fixtures that break something else.
template <class D = co::Volatile>
struct honest_sink {
  using row_type = kit_event;
  using key_type = kit_key;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, D>;
  co::write_outcome apply(co::offset o, const kit_event& e) {
    return table.apply(co::partition_id{0}, o, e);
  }
  rows_t rows() const { return rows_of(table); }
  co::memory::table<kit_event, kit_key, co::capabilities<co::Idempotent, co::OffsetGuarded>> table;
};

}  // namespace conformance::broken
