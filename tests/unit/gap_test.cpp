// SPDX-License-Identifier: BSL-1.0
// Offsets that hold no record (gap_reporting_source): a transactional topic read read_committed
// has a commit marker after each transaction and an aborted transaction's records in its
// offsets, and no poll returns them. An idle partition's position moves over them, durably,
// under every policy that commits positions itself; progress counts none of them; a partition
// with a unit in flight, or a source that knows no gap, is left alone.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {

constexpr co::partition_id p0{0}, p1{1};

/// Two partitions whose records sit at given offsets, each partition ending at a given offset:
/// what lies between holds no record. Knows a gap only once a partition's last record is
/// handed out (as a consumer learns of one at the partition's end).
class gapped_topic final {
 public:
  using record_type = co::partitioned_logged<order_event>;
  using capabilities = co::capabilities<co::Volatile>;

  struct partition {
    std::vector<std::int64_t> offsets;  ///< ascending
    std::int64_t end = 0;
  };

  explicit gapped_topic(std::vector<partition> parts) : parts_(std::move(parts)) {
    reads_.assign(parts_.size(), 0);
  }

  void seek(co::partition_id k, co::position p) { reads_.at(index(k)) = p.value(); }
  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    batch_.clear();
    for (std::size_t i = 0; i < parts_.size() && batch_.size() < max; ++i) {
      for (const std::int64_t o : parts_[i].offsets) {
        if (batch_.size() == max)
          break;
        if (o < reads_[i])
          continue;
        const co::partition_id k{static_cast<std::int32_t>(i)};
        batch_.push_back(
            record_type{k, co::offset{o}, order_event{100 * (k.value() + 1) + o, 7, o}});
        reads_[i] = o + 1;
      }
    }
    return batch_;
  }
  [[nodiscard]] co::position earliest(co::partition_id) const { return co::position{0}; }
  [[nodiscard]] co::position end(co::partition_id k) const {
    return co::position{parts_.at(index(k)).end};
  }
  [[nodiscard]] std::size_t partition_count() const { return parts_.size(); }
  [[nodiscard]] std::vector<co::partition_id> assignment() const {
    std::vector<co::partition_id> all;
    for (std::size_t i = 0; i < parts_.size(); ++i)
      all.push_back(co::partition_id{static_cast<std::int32_t>(i)});
    return all;
  }

  [[nodiscard]] std::optional<co::gap> gap_after(co::partition_id k, co::position p) const {
    asked_.push_back({k, p});
    const std::size_t i = index(k);
    const partition& q = parts_[i];
    const bool all_read = q.offsets.empty() || reads_[i] > q.offsets.back();
    if (!knows_gaps || !all_read || p.value() < reads_[i] || p.value() >= q.end)
      return std::nullopt;
    return co::gap{co::position{q.end}};
  }

  /// The partition's end moves to `end` with no record: an aborted transaction and its marker.
  void extend(co::partition_id k, std::int64_t end) { parts_.at(index(k)).end = end; }

  /// Appends a record at `o` (past the partition's end, which moves past it).
  void append(co::partition_id k, std::int64_t o, std::int64_t end) {
    partition& q = parts_.at(index(k));
    q.offsets.push_back(o);
    q.end = end;
  }

  bool knows_gaps = true;
  mutable std::vector<std::pair<co::partition_id, co::position>> asked_;

 private:
  static std::size_t index(co::partition_id k) { return static_cast<std::size_t>(k.value()); }
  std::vector<partition> parts_;
  std::vector<std::int64_t> reads_;
  std::vector<record_type> batch_;
};
static_assert(co::partitioned_source<gapped_topic>);
static_assert(co::gap_reporting_source<gapped_topic>);

using shared_table = co::memory::table<
    order_event, order_key,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>>;

/// Partition 0: a transaction of 0..4, its marker at 5. Partition 1: 0..2 committed (marker at
/// 3), 4..6 aborted (marker at 7): its records end at 3, the partition at 8.
gapped_topic transactional_topic() {
  return gapped_topic({{{0, 1, 2, 3, 4}, 6}, {{0, 1, 2}, 8}});
}

template <class Pipeline>
void poll_until_idle(Pipeline& p) {
  for (int i = 0; i < 4; ++i)
    (void)p.poll_once();
}

}  // namespace

TEST_CASE(
    "TransactionalPosition: an idle partition's position moves over a marker and an "
    "aborted tail, in a transaction of its own, and progress counts none of them") {
  gapped_topic topic = transactional_topic();
  shared_table table;
  co::pipeline<gapped_topic, shared_table, co::TransactionalPosition<>> p(topic, table);
  poll_until_idle(p);
  CHECK(table.load_position(p0) == co::position{6});
  CHECK(table.load_position(p1) == co::position{8});
  CHECK(table.size() == 8);  // the records, each once
  for (const auto& expected : {std::tuple{p0, 5, 6}, std::tuple{p1, 3, 8}}) {
    // (Not a structured binding: clang 14 does not let INFO's lambda capture one.)
    const co::partition_id k = std::get<0>(expected);
    const int last_record_end = std::get<1>(expected);
    const int end = std::get<2>(expected);
    INFO("partition " << k.value());
    const co::progress pr = p.progress(k);
    CHECK(pr.read == co::position{end});
    CHECK(pr.committed == co::position{end});
    CHECK(pr.unread() == 0);
    CHECK(pr.uncommitted() == 0);
    REQUIRE(pr.records_end.has_value());
    CHECK(*pr.records_end == co::position{last_record_end});
    REQUIRE(pr.unapplied().has_value());
    CHECK(*pr.unapplied() == 0);
  }

  // The next transaction's records (p0 at 6..7, its marker at 8) are read from the moved
  // position, and the position moves over the new marker too.
  topic.append(p0, 6, 7);
  topic.append(p0, 7, 9);
  poll_until_idle(p);
  CHECK(table.load_position(p0) == co::position{9});
  CHECK(table.size() == 10);
  CHECK(p.progress(p0).unread() == 0);
  CHECK(*p.progress(p0).records_end == co::position{8});

  // A restart resumes at the moved positions and applies nothing again.
  gapped_topic again = transactional_topic();
  again.append(p0, 6, 7);
  again.append(p0, 7, 9);
  co::pipeline<gapped_topic, shared_table, co::TransactionalPosition<>> restarted(again, table);
  CHECK(restarted.run() == 0);
  CHECK(restarted.progress(p0).read == co::position{9});
  // The restarted consumer knows nothing of the gaps behind its positions; the positions, made
  // durable only after the writes, vouch for everything before them.
  for (const co::partition_id k : {p0, p1}) {
    INFO("partition " << k.value());
    CHECK(restarted.progress(k).unread() == 0);
    CHECK(restarted.progress(k).unapplied() == 0);
  }
  CHECK(restarted.progress(p1).read == co::position{8});
}

TEST_CASE("AtLeastOnce and AtMostOnce: the position store is moved over the gap") {
  SUBCASE("AtLeastOnce") {
    gapped_topic topic = transactional_topic();
    shared_table table;
    co::memory::position_store<> positions;
    co::pipeline<gapped_topic, shared_table, co::AtLeastOnce<>, co::with_store<decltype(positions)>>
        p(topic, table, positions);
    poll_until_idle(p);
    CHECK(positions.load(p0) == co::position{6});
    CHECK(positions.load(p1) == co::position{8});
    CHECK(p.progress(p1).unread() == 0);
    CHECK(table.size() == 8);
  }
  SUBCASE("AtMostOnce") {
    gapped_topic topic = transactional_topic();
    shared_table table;
    co::memory::position_store<> positions;
    co::pipeline<gapped_topic, shared_table, co::AtMostOnce<>, co::with_store<decltype(positions)>>
        p(topic, table, positions);
    poll_until_idle(p);
    CHECK(positions.load(p0) == co::position{6});
    CHECK(positions.load(p1) == co::position{8});
    CHECK(table.size() == 8);
  }
}

TEST_CASE(
    "a gap is asked about only at the read position of a partition with nothing in "
    "flight, and a source that knows none moves nothing") {
  gapped_topic topic = transactional_topic();
  topic.knows_gaps = false;
  shared_table table;
  co::pipeline<gapped_topic, shared_table, co::TransactionalPosition<>> p(
      topic, table, co::settings{.batch_size = 2});
  poll_until_idle(p);
  poll_until_idle(p);
  CHECK(table.load_position(p0) == co::position{5});  // left on the marker: nothing said
  CHECK(table.load_position(p1) == co::position{3});
  CHECK(p.progress(p1).unread() == 5);
  CHECK_FALSE(p.progress(p1).records_end.has_value());
  // Asked only at a read position: where the partition started (0), or just after one of its
  // records; never in the middle of what was read.
  REQUIRE_FALSE(topic.asked_.empty());
  const std::map<co::partition_id, std::vector<std::int64_t>> after_records{
      {p0, {0, 1, 2, 3, 4, 5}}, {p1, {0, 1, 2, 3}}};
  for (const auto& asked : topic.asked_) {
    const co::partition_id k = asked.first;
    const co::position at = asked.second;
    INFO("asked about partition " << k.value() << " at " << at.value());
    const auto& ok = after_records.at(k);
    CHECK(std::find(ok.begin(), ok.end(), at.value()) != ok.end());
  }

  topic.knows_gaps = true;
  (void)p.poll_once();
  CHECK(table.load_position(p0) == co::position{6});
  CHECK(table.load_position(p1) == co::position{8});
}

TEST_CASE("gaps reported one after another are one run: progress counts none of it") {
  gapped_topic topic = transactional_topic();
  shared_table table;
  co::pipeline<gapped_topic, shared_table, co::TransactionalPosition<>> p(topic, table);
  poll_until_idle(p);
  REQUIRE(table.load_position(p0) == co::position{6});
  // An aborted transaction after the marker: 6..8 aborted, its marker at 9.
  topic.extend(p0, 10);
  poll_until_idle(p);
  CHECK(table.load_position(p0) == co::position{10});
  const co::progress pr = p.progress(p0);
  CHECK(pr.read == co::position{10});
  REQUIRE(pr.records_end.has_value());
  CHECK(*pr.records_end == co::position{5});  // the last record is still the one at 4
  CHECK(pr.unread() == 0);
  CHECK(pr.uncommitted() == 0);
  CHECK(pr.unapplied() == 0);
}
