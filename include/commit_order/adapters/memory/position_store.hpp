// commit_order/adapters/memory/position_store.hpp — an in-memory position store.
//
// Part of the testing kit. It outlives the pipeline that uses it, so a test can "crash" the
// pipeline (destroy it mid-batch) and recover a new one from what the store kept. It keeps one
// position per partition (`load(k)`, `commit(k, p)`); `load()` and `commit(p)` are partition
// 0's, for a single-partition stream. `Durability` is the level it claims, for rules R9a-c.
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

  [[nodiscard]] std::optional<position> load(partition_id k) const {
    const auto it = stored_.find(k);
    return it == stored_.end() ? std::nullopt : std::optional{it->second};
  }

  void commit(partition_id k, position p) {
    stored_[k] = p;
    ++commits_;
  }

  [[nodiscard]] std::optional<position> load() const { return load(partition_id{0}); }
  void commit(position p) {
    commit(partition_id{0}, p);
    fingerprint_.reset();
  }

  /// Partition 0's position with the fingerprint of the record it was committed after.
  void commit(position p, std::uint64_t fingerprint) {
    commit(partition_id{0}, p);
    fingerprint_ = fingerprint;
  }
  [[nodiscard]] std::optional<std::uint64_t> load_fingerprint() const { return fingerprint_; }

  /// How many commits were made: the write load a commit trigger puts on the store.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }

 private:
  std::map<partition_id, position> stored_;
  std::optional<std::uint64_t> fingerprint_;
  std::size_t commits_ = 0;
};

}  // namespace commit_order::memory
