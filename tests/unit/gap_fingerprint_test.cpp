// SPDX-License-Identifier: BSL-1.0
// A gap-reporting source that keeps fingerprints, with a position store that keeps them too:
// a record that fails right after a gap the read position moved over must not move the stored
// position onto the gap's end (where the offset before it is a marker and no fingerprint can be
// stored), or a topic recreated under its name would be read from there. Found by an audit;
// fp_gapped_topic's seek compares the record before an expected position as the Kafka
// sources do.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {

constexpr co::partition_id p0{0};

class fp_gapped_topic final {
 public:
  using record_type = co::partitioned_logged<order_event>;
  using capabilities = co::capabilities<co::Volatile>;
  struct partition {
    std::vector<std::int64_t> offsets;
    std::int64_t end = 0;
  };
  /// `salt`: a topic recreated under the same name has other records at the same offsets.
  fp_gapped_topic(std::vector<partition> parts, std::uint64_t salt)
      : parts_(std::move(parts)), salt_(salt) {
    reads_.assign(parts_.size(), 0);
  }

  void seek(co::partition_id k, co::position p) {
    reads_.at(index(k)) = p.value();
    if (auto it = expected_.find(k); it != expected_.end()) {
      const auto [at, f] = it->second;
      expected_.erase(it);
      ++compared;
      if (at == p.value() && has(k, at - 1) && fp(k, at - 1) != f)
        throw std::runtime_error("offset_reused: partition " + std::to_string(k.value()) +
                                 " record before " + std::to_string(at) + " is another");
    }
  }
  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    batch_.clear();
    for (std::size_t i = 0; i < parts_.size() && batch_.size() < max; ++i) {
      for (const std::int64_t o : parts_[i].offsets) {
        if (batch_.size() == max)
          break;
        if (o < reads_[i])
          continue;
        const co::partition_id k{static_cast<std::int32_t>(i)};
        batch_.push_back(record_type{
            k, co::offset{o},
            order_event{100 * (k.value() + 1) + o, 7, o + static_cast<std::int64_t>(salt_)}});
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
    const std::size_t i = index(k);
    const partition& q = parts_[i];
    const bool all_read = q.offsets.empty() || reads_[i] > q.offsets.back();
    if (!all_read || p.value() < reads_[i] || p.value() >= q.end)
      return std::nullopt;
    return co::gap{co::position{q.end}};
  }
  void append(co::partition_id k, std::int64_t o, std::int64_t end) {
    partition& q = parts_.at(index(k));
    q.offsets.push_back(o);
    q.end = end;
  }

  // fingerprinted_start_source
  void keep_fingerprints() noexcept {}
  [[nodiscard]] std::uint64_t fingerprint(const record_type& r) const {
    return fp(r.source_partition, r.source_offset.value());
  }
  void expect_before(co::partition_id k, co::position p, std::uint64_t f) {
    expected_[k] = {p.value(), f};
  }
  int compared = 0;  ///< expectations the source was given and checked

 private:
  std::uint64_t fp(co::partition_id k, std::int64_t o) const {
    return (salt_ * 1000003ULL) ^ (static_cast<std::uint64_t>(k.value()) << 40) ^
           static_cast<std::uint64_t>(o);
  }
  bool has(co::partition_id k, std::int64_t o) const {
    for (const std::int64_t x : parts_.at(index(k)).offsets)
      if (x == o)
        return true;
    return false;
  }
  static std::size_t index(co::partition_id k) { return static_cast<std::size_t>(k.value()); }
  std::vector<partition> parts_;
  std::uint64_t salt_;
  std::vector<std::int64_t> reads_;
  std::vector<record_type> batch_;
  std::map<co::partition_id, std::pair<std::int64_t, std::uint64_t>> expected_;
};
static_assert(co::gap_reporting_source<fp_gapped_topic>);
static_assert(co::fingerprinted_start_source<fp_gapped_topic>);

/// A per-partition store keeping a fingerprint beside each position (as sqlite/postgres
/// position_store do), in memory.
class fp_store final {
 public:
  using capabilities = co::capabilities<co::Volatile>;
  [[nodiscard]] std::optional<co::position> load(co::partition_id k) const {
    const auto it = stored_.find(k);
    if (it == stored_.end()) {
      loaded_.reset();
      return std::nullopt;
    }
    loaded_ = it->second.second;
    return it->second.first;
  }
  void commit(co::partition_id k, co::position p) { stored_[k] = {p, std::nullopt}; }
  void commit(co::partition_id k, co::position p, std::uint64_t f) { stored_[k] = {p, f}; }
  [[nodiscard]] std::optional<std::uint64_t> loaded_fingerprint() const { return loaded_; }

 private:
  std::map<co::partition_id, std::pair<co::position, std::optional<std::uint64_t>>> stored_;
  mutable std::optional<std::uint64_t> loaded_;
};
static_assert(co::fingerprinting_position_store<fp_store>);

using plain_table =
    co::memory::table<order_event, order_key,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped>>;

/// Rejects one record (every time), forwards the rest.
struct rejecting {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = plain_table::capabilities;
  plain_table* inner;
  std::optional<std::pair<co::partition_id, co::offset>> bad;
  co::write_outcome apply(co::partition_id k, co::offset o, const order_event& r) {
    if (bad && bad->first == k && bad->second == o)
      throw std::runtime_error("the sink rejects this record");
    return inner->apply(k, o, r);
  }
  std::optional<co::offset> applied_watermark(co::partition_id k) const {
    return inner->applied_watermark(k);
  }
};

using fp_pipeline =
    co::pipeline<fp_gapped_topic, rejecting, co::AtLeastOnce<>, co::with_store<fp_store>>;

template <class P>
void poll_until_idle(P& p) {
  for (int i = 0; i < 4; ++i)
    (void)p.poll_once();
}

}  // namespace

TEST_CASE(
    "a record failing right after a marker leaves the position after the last record, with its "
    "fingerprint: a recreated topic is still refused") {
  // p0: a transaction 0..4, its marker at 5. p1: empty (a one-partition topic, in effect).
  fp_gapped_topic topic({{{0, 1, 2, 3, 4}, 6}, {{}, 0}}, 1);
  plain_table table;
  fp_store store;
  rejecting sink{&table, std::pair{p0, co::offset{6}}};
  {
    fp_pipeline p(topic, sink, store);
    poll_until_idle(p);
    REQUIRE(store.load(p0) == co::position{5});  // just after record 4
    REQUIRE(store.loaded_fingerprint().has_value());
    REQUIRE(p.read_position(p0) == co::position{6});  // read moved over the marker
    // The next transaction: one record at 6 (its marker at 7); the sink rejects it.
    topic.append(p0, 6, 8);
    CHECK_THROWS(p.run());
  }
  // The stored position still follows a record, with that record's fingerprint (5, record 4):
  // moved to the failed record (6), it would follow the marker, with no fingerprint.
  const std::optional<co::position> stored = store.load(p0);
  INFO("stored " << (stored ? stored->value() : -1) << ", fingerprint "
                 << (store.loaded_fingerprint() ? "kept" : "none"));
  CHECK(stored == co::position{5});
  CHECK(store.loaded_fingerprint().has_value());

  // The topic is deleted and recreated under its name by the same kind of producer: other
  // records at the same offsets (p0: 0..4, marker, 6, marker, 8, 9; p1 empty).
  fp_gapped_topic recreated({{{0, 1, 2, 3, 4, 6, 8, 9}, 10}, {{}, 0}}, 2);
  plain_table fresh;
  rejecting ok{&fresh, std::nullopt};
  fp_pipeline q(recreated, ok, store);
  // Refused, as for any position stored after a record; read from 6 instead, the new topic's
  // records 0..4 would never be applied.
  CHECK_THROWS_WITH(q.run(), doctest::Contains("offset_reused"));
  CHECK(fresh.size() == 0);
}
