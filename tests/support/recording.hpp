// SPDX-License-Identifier: BSL-1.0
// A sink and a store that write every call they receive into one shared trace, so a test can
// read back the order in which a pipeline ran its steps.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/orders.hpp"

namespace test_support {

using trace = std::vector<std::string>;

template <class... Caps>
struct recording_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = co::with_default_durability_t<co::capabilities<Caps...>, co::Volatile>;

  trace* log;
  std::optional<co::position> stored{};

  void apply(co::offset o, const order_event&) {
    log->push_back("apply " + std::to_string(o.value()));
  }
  void begin() { log->push_back("begin"); }
  void store_position(co::position p) { log->push_back("store " + std::to_string(p.value())); }
  void commit() { log->push_back("commit"); }
  void rollback() { log->push_back("rollback"); }
  std::optional<co::position> load_position() const { return stored; }
};

struct recording_store {
  using capabilities = co::capabilities<co::Volatile>;
  trace* log;
  std::optional<co::position> stored{};
  std::optional<co::position> load() const { return stored; }
  void commit(co::position p) {
    log->push_back("commit position " + std::to_string(p.value()));
    stored = p;
  }
};

}  // namespace test_support
