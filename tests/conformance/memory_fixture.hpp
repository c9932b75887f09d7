// SPDX-License-Identifier: BSL-1.0
// The conformance fixtures of the memory parts: memory::log as the source, memory::table in the
// capability variant `Caps` as the sink, memory::position_store as the store; and the same
// over a memory::partitioned_log of several partitions. Memory parts are their own storage: a
// crash leaves them as they are, so close() does nothing to them and every reopen returns the
// same objects (what "outlives the pipeline" means for the testing kit). The crash tests
// (tests/crash/) run the kit over these fixtures too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
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

/// The memory parts over a topic of `Partitions` partitions: memory::partitioned_log, a consumer
/// manually assigned every partition, the table, a store with one position per partition. The
/// consumer is the process's: close() drops it, and the next source() makes a fresh one.
template <class Caps, std::size_t Partitions, class Key = kit_key>
class partitioned_memory_fixture {
 public:
  static constexpr std::size_t partitions = Partitions;
  using event_type = kit_event;
  using log_type = co::memory::partitioned_log<kit_event>;
  using source_type = typename log_type::consumer;
  using sink_type = co::memory::table<kit_event, Key, Caps>;
  using store_type = co::memory::position_store<>;

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }

  void create_log(co::partition_id k, std::span<const kit_event> events) {
    for (const auto& e : events)
      log_.append(k, e);
  }
  source_type& source() {
    if (!consumer_) {
      std::vector<co::partition_id> all;
      for (std::size_t k = 0; k < Partitions; ++k)
        all.push_back(co::partition_id{static_cast<std::int32_t>(k)});
      consumer_.emplace(log_.make_consumer(std::move(all)));
    }
    return *consumer_;
  }
  sink_type& sink() { return table_; }
  store_type& store() { return store_; }
  void close() { consumer_.reset(); }

  std::vector<co::testing::observed_row<kit_event>> rows() {
    std::vector<co::testing::observed_row<kit_event>> out;
    table_.for_each([&](const auto& r) {
      out.push_back({r.row.key, r.source_offset, r.row, r.source_partition});
    });
    return out;
  }

 private:
  log_type log_{Partitions};
  std::optional<source_type> consumer_;
  sink_type table_;
  store_type store_;
};

}  // namespace conformance
