// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/position_store.hpp — an in-memory position store.
//
// Part of the testing kit. It outlives the pipeline that uses it, so a test can "crash" the
// pipeline (destroy it mid-batch) and recover a new one from what the store kept. It keeps one
// position per partition (`load(k)`, `commit(k, p)`), with the fingerprint of the record each
// was committed after when it is given one (`commit(k, p, f)`, `loaded_fingerprint()`); a
// single-partition pipeline keeps partition 0's. `Durability` is the level it claims, for rules
// R9a-c.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "commit_order/capabilities.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

template <durability_level Durability = Volatile>
class position_store final {
 public:
  using capabilities = commit_order::capabilities<Durability>;

  /// Partition k's position (partition 0's without an argument); the fingerprint stored with
  /// it is then loaded_fingerprint().
  [[nodiscard]] std::optional<position> load(partition_id k = partition_id{0}) {
    const auto it = stored_.find(k);
    if (it == stored_.end()) {
      loaded_.reset();
      return std::nullopt;
    }
    loaded_ = it->second.fingerprint;
    return it->second.at;
  }

  void commit(partition_id k, position p) {
    stored_[k] = slot{p, std::nullopt};
    ++commits_;
  }
  /// With the fingerprint of the record `p` follows.
  void commit(partition_id k, position p, std::uint64_t fingerprint) {
    stored_[k] = slot{p, fingerprint};
    ++commits_;
  }
  /// The fingerprint stored with the position the last load() returned (none when it was
  /// stored without one).
  [[nodiscard]] std::optional<std::uint64_t> loaded_fingerprint() const noexcept { return loaded_; }

  /// How many commits were made: the write load a commit trigger puts on the store.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }

 private:
  struct slot {
    position at;
    std::optional<std::uint64_t> fingerprint;
  };
  std::map<partition_id, slot> stored_;
  std::optional<std::uint64_t> loaded_;
  std::size_t commits_ = 0;
};

}  // namespace commit_order::memory
