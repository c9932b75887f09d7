// SPDX-License-Identifier: BSL-1.0
// What the Kafka tests share: the order stream they produce and reconcile, and a loop that
// polls a pipeline until a condition holds or a deadline passes.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <commit_order/adapters/kafka.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include "shared_table.hpp"

namespace kafka_test {

namespace kf = commit_order::kafka;
using namespace std::chrono_literals;

/// The keyed table the single-consumer tests write into: one row per order, guarded by
/// partition and offset, positions per partition in its transactions.
template <class Durability = co::Volatile>
using order_table =
    co::memory::table<order, co::key<&order::order_id>,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped,
                                       co::Transactional, Durability>>;

/// What was produced: every event, by partition and offset.
struct produced final {
  std::map<co::partition_id, std::vector<order>> by_partition;

  [[nodiscard]] std::size_t size() const {
    std::size_t n = 0;
    for (const auto& [k, v] : by_partition)
      n += v.size();
    return n;
  }
  /// The last event of every order (what a table reconciled against it must show).
  [[nodiscard]] std::map<std::int64_t, order> last_events() const {
    std::map<std::int64_t, order> last;
    for (const auto& [k, v] : by_partition)
      for (const order& o : v)
        last[o.order_id] = o;
    return last;
  }
};

/// Produces `count` order updates over `orders` orders to a topic of `partitions` partitions:
/// order i always goes to partition i % partitions (a key stays in its partition), with its
/// sequence number counting up. `from` continues an earlier run's sequence numbers.
inline void produce_orders(const kf::mock_cluster& mc, const std::string& topic, int partitions,
                           std::int64_t count, std::int64_t orders, produced& out) {
  kf::producer<order> p(mc.client_config(), topic);
  std::map<std::int64_t, std::int64_t> seq;
  for (const auto& [k, v] : out.by_partition)
    for (const order& o : v)
      seq[o.order_id] = std::max(seq[o.order_id], o.seq);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t id = 1 + (i * 7) % orders;
    const co::partition_id k{static_cast<std::int32_t>(id % partitions)};
    const order o{id, ++seq[id], 100 + (i * 31) % 9973};
    p.send(k, o);
    out.by_partition[k].push_back(o);
  }
  p.flush();
}

/// Polls `p` until `done()` or `limit` passes; returns the records polled. Fails the test on
/// the deadline.
template <class Pipeline>
std::size_t pump(Pipeline& p, const std::function<bool()>& done,
                 std::chrono::milliseconds limit = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::size_t n = 0;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      FAIL("the pipeline did not get there within " << limit.count() << " ms");
      break;
    }
    n += p.poll_once();
  }
  return n;
}

/// Every row of a table against the last event of each order produced.
template <class Rows>
void check_rows_match(const Rows& rows, const produced& expected) {
  const auto last = expected.last_events();
  CHECK(rows.size() == last.size());
  for (const auto& entry : last) {
    const std::int64_t id = entry.first;  // (clang 14 cannot capture a structured binding)
    const auto it = rows.find(id);
    REQUIRE_MESSAGE(it != rows.end(), "order " << id << " has no row");
    CHECK(it->second.event == entry.second);
  }
}

}  // namespace kafka_test
