// SPDX-License-Identifier: BSL-1.0
// The conformance fixture of the memory parts: memory::log as the source, memory::table in the
// capability variant `Caps` as the sink, memory::position_store as the store. Memory parts are
// their own storage: a crash leaves them as they are, so close() does nothing and every reopen
// returns the same objects (what "outlives the pipeline" means for the testing kit).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/kit_event.hpp"

namespace conformance {

namespace co = commit_order;

template <class Caps, class Key = kit_key>
class memory_fixture {
 public:
  using event_type = kit_event;
  using source_type = co::memory::log<kit_event>;
  using sink_type = co::memory::table<kit_event, Key, Caps>;
  using store_type = co::memory::position_store<>;

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }

  void create_log(std::span<const kit_event> events) {
    for (const auto& e : events)
      log_.append(e);
  }
  source_type& source() { return log_; }
  sink_type& sink() { return table_; }
  store_type& store() { return store_; }
  void close() {}
  void truncate_before(co::position p) { log_.truncate_before(p); }

  std::vector<co::testing::observed_row<kit_event>> rows() {
    std::vector<co::testing::observed_row<kit_event>> out;
    table_.for_each([&](const auto& r) { out.push_back({r.row.key, r.source_offset, r.row}); });
    return out;
  }

 private:
  source_type log_;
  sink_type table_;
  store_type store_;
};

}  // namespace conformance
