// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/recording_sink.hpp — the real sink, with a journal of what each write did.
//
// The conformance kit runs pipelines over `recording_sink<Sink>`: it forwards every call to the
// adapter's own sink (the adapter does all the work) and declares exactly what that sink
// declares, so the pipeline is built and judged as over the bare sink, and takes the same paths
// (fencing with claim/claim_next, the invariant check on the applied watermark, a run-time
// transaction limit). It forwards the single-partition forms of the sink's calls, or, as
// `recording_sink<Sink, true>` in front of a partitioned source, the per-partition forms
// (`apply(partition, offset, row)`, `load_position(partition)`, ...): never both, so the
// pipeline takes the calls a user's pipeline over that source takes. On the way it keeps a
// journal: per record, how many times a write of it became durable (on return outside a
// transaction, or at the flush of a flushing sink; at commit inside one; never if rolled back
// or if the flush failed), and how many of those the offset
// guard absorbed. It can also fail chosen records a chosen number of times before they reach
// the sink — a record's failure, for the random schedules' error handling.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/detail/loop/parts.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::testing {

/// What became durable, per record. A record is its source offset on a single partition; over
/// several partitions, `partition_starts[k] + offset` (the records of partition k follow those
/// of the partitions before it).
struct journal {
  std::vector<int> delivered;  ///< durable deliveries per record (index = offset on one partition)
  std::size_t absorbed = 0;    ///< durable deliveries the offset guard kept out
  /// Where each partition's records begin in `delivered`; empty: one partition.
  std::vector<std::int64_t> partition_starts;
  /// Asked when a write becomes durable: false once the power is out (the write was not
  /// acknowledged). Unset: always acknowledged.
  std::function<bool()> acknowledged;
  /// Called for every durable delivery, with the record's index and what the sink reported
  /// (`outcome_known` is false for a sink whose apply returns void).
  std::function<void(std::int64_t record, write_outcome, bool outcome_known)> on_delivered;
  /// Called for every write the sink took, when it took it (durable or not yet), with the
  /// record's index: the order the pipeline wrote the records in.
  std::function<void(std::int64_t)> on_applied;
  /// Called after every durable change, and after a rollback (the regression watch reads the
  /// sink's rows here).
  std::function<void()> after_durable_change;

  /// The record at offset `o` of partition `k`.
  [[nodiscard]] std::int64_t index(partition_id k, offset o) const {
    if (partition_starts.empty())
      return o.value();
    return partition_starts.at(static_cast<std::size_t>(k.value())) + o.value();
  }
  /// A durable delivery of the record at offset `o` (of a single partition).
  void deliver(offset o, write_outcome out, bool outcome_known = true) {
    deliver_record(o.value(), out, outcome_known);
  }
  [[nodiscard]] int deliveries(std::int64_t record) const {
    const auto i = static_cast<std::size_t>(record);
    return i < delivered.size() ? delivered[i] : 0;
  }
  /// A durable delivery of record `record` (see index()).
  void deliver_record(std::int64_t record, write_outcome out, bool outcome_known = true) {
    if (acknowledged && !acknowledged())
      return;
    const auto i = static_cast<std::size_t>(record);
    if (i >= delivered.size())
      delivered.resize(i + 1, 0);
    ++delivered[i];
    if (out == write_outcome::absorbed)
      ++absorbed;
    if (on_delivered)
      on_delivered(record, out, outcome_known);
  }
};

/// The failure the kit injects for a record (a value the sink refuses): the record's failure,
/// never the world's, so the pipeline's error handling acts on it.
class injected_record_failure final : public std::runtime_error {
 public:
  explicit injected_record_failure(offset o)
      : std::runtime_error("the conformance kit failed the record at offset " +
                           std::to_string(o.value()) + " on purpose") {}
};

/// `Partitioned`: forward the per-partition forms of the sink's calls (in front of a partitioned
/// source) instead of the single-partition ones.
template <class Sink, bool Partitioned = false>
class recording_sink {
  static constexpr bool transactional = requires(Sink & s) {
    s.begin();
    s.commit();
    s.rollback();
  };
  static constexpr bool single = !Partitioned;
  using single_part_t = commit_order::detail::sink_part<false, Sink>;
  static constexpr bool positioned =
      transactional_sink<Sink> || partitioned_transactional_sink<Sink>;
  single_part_t single_part() const noexcept { return single_part_t(*inner_); }

 public:
  using row_type = sink_row_t<Sink>;
  using key_type = sink_key_t<Sink>;
  using capabilities = capabilities_of_t<Sink>;
  using inner_type = Sink;

  /// `failures`: record (its offset on one partition) -> failures left before the record
  /// reaches the sink (-1: forever).
  recording_sink(Sink& inner, journal& j, std::map<offset, int>* failures = nullptr)
      : inner_(&inner), journal_(&j), failures_(failures) {}

  write_outcome apply(offset o, const row_type& row) requires single {
    return record(journal_->index(partition_id{0}, o),
                  [&] { return single_part_t::apply(*inner_, partition_id{0}, o, row); });
  }
  write_outcome apply(partition_id k, offset o, const row_type& row) requires Partitioned {
    return record(journal_->index(k, o), [&] { return inner_->apply(k, o, row); });
  }

  void begin() requires transactional {
    inner_->begin();
    in_tx_ = true;
    staged_.clear();
  }
  void commit() requires transactional {
    inner_->commit();
    in_tx_ = false;
    for (const staged& s : staged_)
      journal_->deliver_record(s.record, s.out, outcome_known);
    if (!staged_.empty())
      changed();
    staged_.clear();
  }
  /// The rollback must restore the committed rows, never something older: the regression
  /// watch looks again.
  void rollback() requires transactional {
    in_tx_ = false;
    staged_.clear();
    inner_->rollback();
    changed();
  }

  /// A sink whose rows are durable at flush(): its writes are journalled then, as a
  /// transaction's are at commit; a flush that throws delivered none of them.
  void flush() requires flushing_sink<Sink> {
    try {
      inner_->flush();
    } catch (...) {
      staged_.clear();
      throw;
    }
    for (const staged& s : staged_)
      journal_->deliver_record(s.record, s.out, outcome_known);
    if (!staged_.empty())
      changed();
    staged_.clear();
  }

  // ---- the single-partition forms ----------------------------------------------------------
  // Partition 0's, as the pipeline reaches a sink of a single-partition source (a sink that
  // keeps a position per partition keeps partition 0's).
  void store_position(position p) requires single && positioned {
    single_part().store_position(partition_id{0}, p);
  }
  void store_position(position p, epoch e) requires single && single_part_t::fences {
    single_part().store_position(partition_id{0}, p, e);
  }
  std::optional<position> claim(epoch e) requires single && single_part_t::fences {
    return single_part().claim(partition_id{0}, e);
  }
  claimed claim_next() requires single && single_part_t::fences {
    return single_part().claim_next(partition_id{0});
  }
  std::optional<position> load_position() const requires single && positioned {
    return single_part().load_position(partition_id{0});
  }
  std::optional<offset> applied_watermark() const requires single && single_part_t::has_watermark {
    return single_part().applied_watermark(partition_id{0});
  }

  // ---- the per-partition forms ------------------------------------------------------------
  void store_position(partition_id k, position p) requires Partitioned &&
      requires(Sink& s, partition_id j, position q) {
    s.store_position(j, q);
  }
  { inner_->store_position(k, p); }
  void store_position(partition_id k, position p, epoch e) requires Partitioned &&
      requires(Sink& s, partition_id j, position q, epoch f) {
    s.store_position(j, q, f);
  }
  { inner_->store_position(k, p, e); }
  std::optional<position> claim(partition_id k, epoch e) requires Partitioned &&
      requires(Sink& s, partition_id j, epoch f) {
    s.claim(j, f);
  }
  { return inner_->claim(k, e); }
  claimed claim_next(partition_id k) requires Partitioned && requires(Sink& s, partition_id j) {
    s.claim_next(j);
  }
  { return inner_->claim_next(k); }
  std::optional<position> load_position(partition_id k) const requires Partitioned &&
      requires(Sink& s, partition_id j) {
    s.load_position(j);
  }
  { return inner_->load_position(k); }
  std::optional<offset> applied_watermark(partition_id k) const requires Partitioned
      && partitioned_watermarked_sink<Sink> {
    return inner_->applied_watermark(k);
  }

  // ---- either ---------------------------------------------------------------------------
  std::int64_t era() const requires stream_registry<Sink> {
    return static_cast<std::int64_t>(inner_->era());
  }
  void check_partition_count(std::size_t n) requires stream_registry<Sink> {
    inner_->check_partition_count(n);
  }
  std::size_t max_transaction_rows() const requires runtime_limited_sink<Sink> {
    return static_cast<std::size_t>(inner_->max_transaction_rows());
  }
  // What the positions vouch for: the kit runs the bindings a user's pipeline has.
  std::string bound_table() const requires table_bound_sink<Sink> { return inner_->bound_table(); }
  std::string bound_database() const requires database_bound_sink<Sink> {
    return inner_->bound_database();
  }
  void bind_source(const std::string& identity) requires source_bound_sink<Sink> {
    inner_->bind_source(identity);
  }

  [[nodiscard]] Sink& inner() const noexcept { return *inner_; }

 private:
  struct staged {
    std::int64_t record;
    write_outcome out;
  };
  static constexpr bool outcome_known = [] {
    if constexpr (Partitioned) {
      return std::is_same_v<decltype(std::declval<Sink&>().apply(partition_id{}, offset{},
                                                                 std::declval<const row_type&>())),
                            write_outcome>;
    } else {
      return std::is_same_v<decltype(single_part_t::apply(std::declval<Sink&>(), partition_id{},
                                                          offset{},
                                                          std::declval<const row_type&>())),
                            write_outcome>;
    }
  }();

  /// One write of record `i`: fail it if it is to fail, else hand it to the sink (`write`) and
  /// journal it (now, or at commit inside a transaction).
  template <class Write>
  write_outcome record(std::int64_t i, Write&& write) {
    if (failures_ != nullptr) {
      if (auto it = failures_->find(offset{i}); it != failures_->end() && it->second != 0) {
        if (it->second > 0)
          --it->second;
        throw injected_record_failure(offset{i});
      }
    }
    write_outcome out = write_outcome::applied;
    if constexpr (outcome_known) {
      out = write();
    } else {
      write();
    }
    if (journal_->on_applied)
      journal_->on_applied(i);
    if (in_tx_ || flushing_sink<Sink>) {
      staged_.push_back(staged{i, out});
    } else {
      journal_->deliver_record(i, out, outcome_known);
      changed();
    }
    return out;
  }

  void changed() {
    if (journal_->after_durable_change)
      journal_->after_durable_change();
  }

  Sink* inner_;
  journal* journal_;
  std::map<offset, int>* failures_;
  std::vector<staged> staged_;
  bool in_tx_ = false;
};

}  // namespace commit_order::testing
