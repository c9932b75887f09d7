// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/parts.hpp — the parts as the loop sees them: per partition (private).
//
// The loop has one model: every part is per partition. A partitioned source, a per-partition
// sink or store is used as it is; a single-partition one is adapted here, once, as partition 0,
// always owned. The loop reaches each part through `->` on one of these, and never asks which
// kind it holds. The rules (R19, S16, S17) have made sure the calls forwarded here exist.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "commit_order/concepts.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::detail {

/// A part the loop uses as it is: `->` reaches it.
template <class P>
class part_as_is {
 public:
  part_as_is() = default;
  explicit part_as_is(P& p) noexcept : p_(&p) {}
  P* operator->() const noexcept { return p_; }

 private:
  P* p_ = nullptr;
};

/// A single-partition source as partition 0 of a partitioned one.
template <class S>
class source_as_partition_zero {
 public:
  source_as_partition_zero() = default;
  explicit source_as_partition_zero(S& s) noexcept : s_(&s) {}
  source_as_partition_zero* operator->() noexcept { return this; }
  const source_as_partition_zero* operator->() const noexcept { return this; }

  decltype(auto) poll(std::size_t n) { return s_->poll(n); }
  static std::array<partition_id, 1> assignment() noexcept { return {partition_id{0}}; }
  void seek(partition_id, position p) { s_->seek(p); }
  position earliest(partition_id) const { return s_->earliest(); }
  position end(partition_id) const { return s_->end(); }
  std::optional<gap> gap_after(partition_id, position p) const { return s_->gap_after(p); }
  void keep_fingerprints() { s_->keep_fingerprints(); }
  void expect_before(partition_id, position p, std::uint64_t f) { s_->expect_before(p, f); }
  template <class R>
  std::uint64_t fingerprint(const R& r) {
    return s_->fingerprint(r);
  }
  std::optional<std::uint64_t> fingerprint_at(offset o) { return s_->fingerprint_at(o); }
  std::string identity() const { return s_->identity(); }

 private:
  S* s_ = nullptr;
};

template <class S>
using source_part_t =
    std::conditional_t<partitioned_source<S>, part_as_is<S>, source_as_partition_zero<S>>;

/// A sink as the loop of a pipeline (`Partitioned` or not) sees it: positions per partition,
/// rows applied with their partition. Where the sink keeps one position (a single-partition
/// pipeline over a `transactional_sink`), partition 0's is that one. A single-partition
/// pipeline's rows are partition 0's, as its positions are, whatever partition its records
/// name (a Kafka partition_source's name the topic's): a row under another partition than its
/// position would be invisible to the partition's guard and watermark.
template <bool Partitioned, class K>
class sink_part {
 public:
  /// The position calls take the single forms: the pipeline has one partition, and the sink
  /// keeps one position.
  static constexpr bool single_positions = !Partitioned && transactional_sink<K>;
  /// Does the loop fence with this sink: does it keep owner epochs in the form it uses?
  static constexpr bool fences =
      Partitioned ? partitioned_fencing_sink<K> : (fencing_sink<K> || partitioned_fencing_sink<K>);
  static constexpr bool single_fencing = !Partitioned && fencing_sink<K>;
  /// Can the loop read the applied watermark of one partition? A sink that reports one watermark
  /// for all its rows cannot answer for a partition of a shared table.
  static constexpr bool has_watermark =
      partitioned_watermarked_sink<K> || (!Partitioned && watermarked_sink<K>);

  sink_part() = default;
  explicit sink_part(K& k) noexcept : k_(&k) {}
  sink_part* operator->() noexcept { return this; }
  const sink_part* operator->() const noexcept { return this; }
  K& sink() const noexcept { return *k_; }

  /// Applies one row to `sink`: with its partition where the rows record it, without where they
  /// do not. Static, on the sink itself: the write loop holds the sink, as a hand-written loop
  /// does, not this adapter.
  template <class Row>
  static decltype(auto) apply(K& sink, [[maybe_unused]] partition_id k, offset o, const Row& row) {
    if constexpr (Partitioned && partitioned_sink<K>) {
      return sink.apply(k, o, row);
    } else if constexpr (requires { sink.apply(o, row); }) {
      return sink.apply(o, row);
    } else if constexpr (Partitioned) {
      return sink.apply(k, o, row);
    } else {
      return sink.apply(partition_id{0}, o, row);
    }
  }

  std::optional<position> load_position(partition_id k) {
    if constexpr (single_positions)
      return k_->load_position();
    else
      return k_->load_position(k);
  }
  void store_position(partition_id k, position p) {
    if constexpr (single_positions)
      k_->store_position(p);
    else
      k_->store_position(k, p);
  }
  void store_position(partition_id k, position p, epoch e) {
    if constexpr (single_fencing)
      k_->store_position(p, e);
    else
      k_->store_position(k, p, e);
  }
  void store_position(partition_id k, position p, epoch e, std::uint64_t f) {
    k_->store_position(k, p, e, f);
  }
  std::optional<position> claim(partition_id k, epoch e) {
    if constexpr (single_fencing)
      return k_->claim(e);
    else
      return k_->claim(k, e);
  }
  claimed claim_next(partition_id k) {
    if constexpr (single_fencing)
      return k_->claim_next();
    else
      return k_->claim_next(k);
  }
  std::optional<offset> applied_watermark(partition_id k) const {
    if constexpr (!Partitioned && watermarked_sink<K>)
      return k_->applied_watermark();
    else
      return k_->applied_watermark(k);
  }

  void begin() { k_->begin(); }
  void commit() { k_->commit(); }
  void rollback() { k_->rollback(); }
  std::size_t max_transaction_rows() const { return k_->max_transaction_rows(); }
  std::optional<std::uint64_t> claimed_fingerprint() const { return k_->claimed_fingerprint(); }
  void bind_source(const std::string& identity) { k_->bind_source(identity); }
  void check_partition_count(std::size_t n) { k_->check_partition_count(n); }
  decltype(auto) era() { return k_->era(); }
  std::string bound_table() const { return k_->bound_table(); }
  std::string bound_database() const { return k_->bound_database(); }

 private:
  K* k_ = nullptr;
};

/// A sink as a single-partition pipeline reaches it: partition 0's calls, in whichever form the
/// sink has (the testing kit drives a fixture's sink through this, as the loop does).
template <class K>
sink_part<false, K> partition_zero_of(K& k) noexcept {
  return sink_part<false, K>(k);
}

/// A position store as the loop sees it: one position per partition. A store that keeps one
/// position keeps partition 0's.
template <bool Partitioned, class S>
class store_part {
 public:
  /// The store keeps one position: a single-partition pipeline over a `position_store`.
  static constexpr bool single = !Partitioned && position_store<S>;

  store_part() = default;
  explicit store_part(S& s) noexcept : s_(&s) {}
  store_part* operator->() noexcept { return this; }
  const store_part* operator->() const noexcept { return this; }

  std::optional<position> load(partition_id k) {
    if constexpr (single)
      return s_->load();
    else
      return s_->load(k);
  }
  void commit(partition_id k, position p) {
    if constexpr (single)
      s_->commit(p);
    else
      s_->commit(k, p);
  }
  /// With the fingerprint of the record `p` follows: beside partition k's position
  /// (fingerprinting_position_store), or beside the one position (fingerprint_store).
  void commit_after(partition_id k, position p, std::uint64_t f) {
    if constexpr (fingerprinting_position_store<S>)
      s_->commit(k, p, f);
    else
      s_->commit(p, f);
  }
  /// A unit's positions over several partitions, in one request (batch_position_store).
  void commit(std::span<const start_at> positions) { s_->commit(positions); }
  /// The fingerprint stored with the position the last load returned.
  std::optional<std::uint64_t> loaded_fingerprint() {
    if constexpr (fingerprinting_position_store<S>)
      return s_->loaded_fingerprint();
    else
      return s_->load_fingerprint();
  }
  template <class... A>
  requires requires(S& s, const A&... a) { s.bind_to(a...); }
  void bind_to(const A&... a) { s_->bind_to(a...); }

 private:
  S* s_ = nullptr;
};

/// A position store as a single-partition pipeline reaches it: partition 0's calls, in
/// whichever form the store has (the testing kit drives a fixture's store through this).
template <class S>
store_part<false, S> partition_zero_store_of(S& s) noexcept {
  return store_part<false, S>(s);
}

}  // namespace commit_order::detail
