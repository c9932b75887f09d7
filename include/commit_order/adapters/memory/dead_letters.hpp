// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/dead_letters.hpp — an in-memory dead-letter sink.
//
// Part of the testing kit: it keeps every record a pipeline gave up on, with the reason, so a
// test can check that nothing the position passed went missing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

template <class Event, durability_level Durability = Volatile>
class dead_letters final {
 public:
  using capabilities = commit_order::capabilities<Durability>;

  struct letter {
    offset source_offset;
    Event event;
    std::string reason;
    partition_id source_partition{};
  };

  /// Keeps the letter unless one for the same record (partition, offset) is kept already: a
  /// replay that gives up on the record again adds nothing (counted in `repeats()`).
  void put(partition_id k, offset o, const Event& e, const char* reason) {
    const auto same = [&](const letter& l) {
      return l.source_partition == k && l.source_offset == o;
    };
    if (std::ranges::any_of(letters_, same)) {
      ++repeats_;
      return;
    }
    letters_.push_back({o, e, reason, k});
  }

  [[nodiscard]] const std::vector<letter>& letters() const noexcept { return letters_; }
  /// Letters offered again for a record that has one (replays), and not kept twice.
  [[nodiscard]] std::size_t repeats() const noexcept { return repeats_; }

 private:
  std::vector<letter> letters_;
  std::size_t repeats_ = 0;
};

}  // namespace commit_order::memory
