// SPDX-License-Identifier: BSL-1.0
// A sink wrapper that fails chosen records a chosen number of times, then behaves like the
// table it wraps: "record 300 of 500 fails", on demand. Everything but apply is forwarded by
// memory::forwarding_sink, so the wrapper is, to the rules, exactly the sink it wraps.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "support/orders.hpp"

namespace test_support {

template <class Inner>
struct flaky_sink : co::memory::forwarding_sink<Inner&> {
  /// offset -> failures left (-1: fails forever).
  std::map<co::offset, int> failures{};

  explicit flaky_sink(Inner& inner, std::map<co::offset, int> fail = {})
      : co::memory::forwarding_sink<Inner&>(inner), failures(std::move(fail)) {}

  auto apply(co::offset o, const typename Inner::row_type& row) {
    if (auto it = failures.find(o); it != failures.end() && it->second != 0) {
      if (it->second > 0)
        --it->second;
      throw std::runtime_error("sink rejected offset " + std::to_string(o.value()));
    }
    return this->inner().apply(commit_order::partition_id{0}, o, row);
  }
};

}  // namespace test_support
