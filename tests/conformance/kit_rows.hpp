// SPDX-License-Identifier: BSL-1.0
// Where the SQLite fixtures keep the kit's events: the table the SQLite sinks write, a
// connection that closes as a killed process leaves it, and the slot of a fixture's power-cut
// facility.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <type_traits>

#include <commit_order/adapters/sqlite/connection.hpp>
#include <commit_order/adapters/sqlite/table.hpp>

#include "conformance/kit_event.hpp"

namespace conformance {

namespace sq = commit_order::sqlite;

/// The table the SQLite sinks write: keyed on `k` (the append sink has no key constraint).
struct kit_rows final
    : sq::table_layout<"kit_rows", kit_event, sq::key_columns<sq::column<"k", &kit_event::key>>,
                       sq::value_columns<sq::column<"seq", &kit_event::seq>>> {};

/// A SQLite connection that closes as a killed process leaves it: without checkpointing its WAL
/// (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE), so the next open recovers from the WAL as it would after
/// a crash. A fixture's close() stands for the process's death, not for a clean shutdown.
inline void close_like_a_kill(sq::connection& db) {
  int set = 0;
  if (sqlite3_db_config(db.get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, &set) != SQLITE_OK ||
      set != 1)
    throw std::runtime_error("cannot turn off SQLite's checkpoint on close");
}

/// Fixtures without simulated power cuts.
struct no_power final {};

/// The power-cut facility a fixture holds: built over the fixture's storage root.
template <class Power>
struct power_slot {
  explicit power_slot(const std::filesystem::path&) {}
};
template <class Power>
requires(!std::is_same_v<Power, no_power>) struct power_slot<Power> {
  explicit power_slot(const std::filesystem::path& root) : power(root) {}
  Power power;
};

}  // namespace conformance
