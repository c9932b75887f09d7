// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/recording_sink.hpp — the real sink, with a journal of what each write did.
//
// The conformance kit runs pipelines over `recording_sink<Sink>`: it forwards every call to the
// adapter's own sink (the adapter does all the work) and declares exactly what that sink
// declares, so the pipeline is built and judged as over the bare sink, and takes the same paths
// (fencing with claim/claim_next, the invariant check on the applied watermark, a run-time
// transaction limit). The kit drives single-partition pipelines, so the per-partition forms of
// a sink that has both are not forwarded. On the way it keeps a
// journal: per source offset, how many times a write of it became durable (on return outside a
// transaction; at commit inside one; never if rolled back), and how many of those the offset
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
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::testing {

/// What became durable, per source offset.
struct journal {
  std::vector<int> delivered;  ///< durable deliveries per offset (index = offset)
  std::size_t absorbed = 0;    ///< durable deliveries the offset guard kept out
  /// Asked when a write becomes durable: false once the power is out (the write was not
  /// acknowledged). Unset: always acknowledged.
  std::function<bool()> acknowledged;
  /// Called for every durable delivery, with what the sink reported (`outcome_known` is false
  /// for a sink whose apply returns void).
  std::function<void(offset, write_outcome, bool outcome_known)> on_delivered;
  /// Called after every durable change (the regression watch reads the sink's rows here).
  std::function<void()> after_durable_change;

  void deliver(offset o, write_outcome out, bool outcome_known = true) {
    if (acknowledged && !acknowledged())
      return;
    const auto i = static_cast<std::size_t>(o.value());
    if (i >= delivered.size())
      delivered.resize(i + 1, 0);
    ++delivered[i];
    if (out == write_outcome::absorbed)
      ++absorbed;
    if (on_delivered)
      on_delivered(o, out, outcome_known);
  }
  [[nodiscard]] int deliveries(std::int64_t o) const {
    const auto i = static_cast<std::size_t>(o);
    return i < delivered.size() ? delivered[i] : 0;
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

template <class Sink>
class recording_sink {
  static constexpr bool transactional = requires(Sink & s) {
    s.begin();
    s.commit();
    s.rollback();
  };

 public:
  using row_type = sink_row_t<Sink>;
  using key_type = sink_key_t<Sink>;
  using capabilities = capabilities_of_t<Sink>;
  using inner_type = Sink;

  /// `failures`: offset -> failures left before the record reaches the sink (-1: forever).
  recording_sink(Sink& inner, journal& j, std::map<offset, int>* failures = nullptr)
      : inner_(&inner), journal_(&j), failures_(failures) {}

  write_outcome apply(offset o, const row_type& row) {
    if (failures_ != nullptr) {
      if (auto it = failures_->find(o); it != failures_->end() && it->second != 0) {
        if (it->second > 0)
          --it->second;
        throw injected_record_failure(o);
      }
    }
    write_outcome out = write_outcome::applied;
    if constexpr (std::is_same_v<decltype(inner_->apply(o, row)), write_outcome>) {
      out = inner_->apply(o, row);
    } else {
      inner_->apply(o, row);
    }
    if (in_tx_) {
      staged_.push_back(staged{o, out});
    } else {
      journal_->deliver(o, out, outcome_known);
      changed();
    }
    return out;
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
      journal_->deliver(s.o, s.out, outcome_known);
    if (!staged_.empty())
      changed();
    staged_.clear();
  }
  void rollback() requires transactional {
    in_tx_ = false;
    staged_.clear();
    inner_->rollback();
  }
  void store_position(position p) requires requires(Sink& s, position q) { s.store_position(q); }
  { inner_->store_position(p); }
  void store_position(position p, epoch e) requires requires(Sink& s, position q, epoch f) {
    s.store_position(q, f);
  }
  { inner_->store_position(p, e); }
  std::optional<position> claim(epoch e) requires requires(Sink& s, epoch f) { s.claim(f); }
  { return inner_->claim(e); }
  claimed claim_next() requires requires(Sink& s) { s.claim_next(); }
  { return inner_->claim_next(); }
  std::int64_t era() const requires stream_registry<Sink> {
    return static_cast<std::int64_t>(inner_->era());
  }
  void check_partition_count(std::size_t n) requires stream_registry<Sink> {
    inner_->check_partition_count(n);
  }
  std::optional<position> load_position() const requires requires(Sink& s) { s.load_position(); }
  { return inner_->load_position(); }
  std::optional<offset> applied_watermark() const requires watermarked_sink<Sink> {
    return inner_->applied_watermark();
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
    offset o;
    write_outcome out;
  };
  static constexpr bool outcome_known =
      std::is_same_v<decltype(std::declval<Sink&>().apply(offset{},
                                                          std::declval<const row_type&>())),
                     write_outcome>;

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
