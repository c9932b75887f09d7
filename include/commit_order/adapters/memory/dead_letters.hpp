// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/dead_letters.hpp — an in-memory dead-letter sink.
//
// Part of the testing kit: it keeps every record a pipeline gave up on, with the reason, so a
// test can check that nothing the position passed went missing.
#pragma once

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
  };

  void put(offset o, const Event& e, const char* reason) { letters_.push_back({o, e, reason}); }

  [[nodiscard]] const std::vector<letter>& letters() const noexcept { return letters_; }

 private:
  std::vector<letter> letters_;
};

}  // namespace commit_order::memory
