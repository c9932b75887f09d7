// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/position_store.hpp — an in-memory position store.
//
// Part of the testing kit. It outlives the pipeline that uses it, so a test can "crash" the
// pipeline (destroy it mid-batch) and recover a new one from what the store kept. `Durability`
// is the level it claims, for rule R9; the default claims nothing beyond the process.
#pragma once

#include <cstddef>
#include <optional>

#include "commit_order/capabilities.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

template <durability_level Durability = Volatile>
class position_store final {
 public:
  using capabilities = commit_order::capabilities<Durability>;

  [[nodiscard]] std::optional<position> load() const noexcept { return stored_; }

  void commit(position p) noexcept {
    stored_ = p;
    ++commits_;
  }

  /// How many commits were made: the write load a commit trigger puts on the store.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }

 private:
  std::optional<position> stored_;
  std::size_t commits_ = 0;
};

}  // namespace commit_order::memory
