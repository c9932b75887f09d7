// SPDX-License-Identifier: BSL-1.0
// The conformance fixtures of the memory parts: memory::log as the source, memory::table in the
// capability variant `Caps` (or memory::transactional_log, the model of a topic written in
// transactions) as the sink, memory::position_store as the store; and the same over a
// memory::partitioned_log of several partitions. Memory parts are their own storage: a
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

/// The sink's rows as the kit reads them back: a table's, in key or append order.
template <class Key, class Caps>
std::vector<co::testing::observed_row<kit_event>> rows_of(
    const co::memory::table<kit_event, Key, Caps>& table) {
  std::vector<co::testing::observed_row<kit_event>> out;
  table.for_each([&](const auto& r) {
    out.push_back({r.row.key, r.source_offset, r.row, r.source_partition});
  });
  return out;
}

/// A transactional log's messages as the kit reads them back, in log order.
inline std::vector<co::testing::observed_row<kit_event>> rows_of(
    const std::vector<co::memory::log_message<kit_event>>& messages) {
  std::vector<co::testing::observed_row<kit_event>> out;
  for (const auto& m : messages)
    out.push_back({m.row.key, m.source_offset, m.row, m.source_partition, m.at});
  return out;
}
/// A transactional log's rows: what its read_committed reader is shown.
template <co::durability_level D>
std::vector<co::testing::observed_row<kit_event>> rows_of(
    const co::memory::transactional_log<kit_event, D>& log) {
  return rows_of(log.read_committed());
}

template <class Sink>
inline constexpr bool is_transactional_log = false;
template <class Row, co::durability_level D>
inline constexpr bool is_transactional_log<co::memory::transactional_log<Row, D>> = true;

/// The memory parts over one partition, into `Sink`: memory::log as the source, the sink,
/// memory::position_store as the store.
template <class Sink>
class memory_fixture_over {
 public:
  using event_type = kit_event;
  using source_type = co::memory::log<kit_event>;
  using sink_type = Sink;
  using store_type = co::memory::position_store<>;

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }

  void create_log(std::span<const kit_event> events) {
    for (const auto& e : events)
      log_.append(e);
  }
  source_type& source() { return log_; }
  sink_type& sink() { return sink_; }
  store_type& store() { return store_; }
  void close() {}
  void truncate_before(co::position p) { log_.truncate_before(p); }

  /// A table's rows; a transactional log's read_committed view.
  std::vector<co::testing::observed_row<kit_event>> rows() { return rows_of(sink_); }
  /// A transactional log's read_uncommitted view.
  std::vector<co::testing::observed_row<kit_event>> uncommitted_rows() requires
      is_transactional_log<Sink> {
    return rows_of(sink_.read_uncommitted());
  }

 private:
  source_type log_;
  sink_type sink_;
  store_type store_;
};

/// The memory parts into memory::table in the capability variant `Caps`.
template <class Caps, class Key = kit_key>
using memory_fixture = memory_fixture_over<co::memory::table<kit_event, Key, Caps>>;

/// The memory parts into memory::transactional_log, the model of a topic written in
/// transactions: the kit runs its transactional-log section over it.
using transactional_log_fixture = memory_fixture_over<co::memory::transactional_log<kit_event>>;

/// The memory parts over a topic of `Partitions` partitions, into `Sink`: memory::partitioned_log,
/// a consumer manually assigned every partition, the sink, a store with one position per
/// partition. The consumer is the process's: close() drops it, and the next source() makes a
/// fresh one.
template <class Sink, std::size_t Partitions>
class partitioned_memory_fixture_over {
 public:
  static constexpr std::size_t partitions = Partitions;
  using event_type = kit_event;
  using log_type = co::memory::partitioned_log<kit_event>;
  using source_type = typename log_type::consumer;
  using sink_type = Sink;
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
  sink_type& sink() { return sink_; }
  store_type& store() { return store_; }
  void close() { consumer_.reset(); }

  /// A table's rows; a transactional log's read_committed view.
  std::vector<co::testing::observed_row<kit_event>> rows() { return rows_of(sink_); }
  /// A transactional log's read_uncommitted view.
  std::vector<co::testing::observed_row<kit_event>> uncommitted_rows() requires
      is_transactional_log<Sink> {
    return rows_of(sink_.read_uncommitted());
  }

 private:
  log_type log_{Partitions};
  std::optional<source_type> consumer_;
  sink_type sink_;
  store_type store_;
};

template <class Caps, std::size_t Partitions, class Key = kit_key>
using partitioned_memory_fixture =
    partitioned_memory_fixture_over<co::memory::table<kit_event, Key, Caps>, Partitions>;

template <std::size_t Partitions>
using partitioned_transactional_log_fixture =
    partitioned_memory_fixture_over<co::memory::transactional_log<kit_event>, Partitions>;

}  // namespace conformance
