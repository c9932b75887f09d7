// SPDX-License-Identifier: BSL-1.0
// A sink wrapper that fails chosen records a chosen number of times, then behaves like the
// table it wraps: the "record 300 of 500 fails" of the seeds, on demand.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "support/orders.hpp"

namespace test_support {

template <class Inner>
struct flaky_sink {
  using row_type = typename Inner::row_type;
  using key_type = typename Inner::key_type;
  using capabilities = typename Inner::capabilities;

  Inner* inner;
  /// offset -> failures left (-1: fails forever).
  std::map<co::offset, int> failures{};

  co::write_outcome apply(co::offset o, const row_type& row) {
    if (auto it = failures.find(o); it != failures.end() && it->second != 0) {
      if (it->second > 0)
        --it->second;
      throw std::runtime_error("sink rejected offset " + std::to_string(o.value()));
    }
    return inner->apply(o, row);
  }

  void begin() requires co::transactional_sink<Inner> { inner->begin(); }
  void commit() requires co::transactional_sink<Inner> { inner->commit(); }
  void rollback() requires co::transactional_sink<Inner> { inner->rollback(); }
  void store_position(co::position p) requires co::transactional_sink<Inner> {
    inner->store_position(p);
  }
  void store_position(co::position p, co::epoch e) requires co::fencing_sink<Inner> {
    inner->store_position(p, e);
  }
  std::optional<co::position> claim(co::epoch e) requires co::fencing_sink<Inner> {
    return inner->claim(e);
  }
  std::optional<co::position> load_position() const requires co::transactional_sink<Inner> {
    return inner->load_position();
  }
  std::optional<co::offset> applied_watermark() const { return inner->applied_watermark(); }
};

}  // namespace test_support
