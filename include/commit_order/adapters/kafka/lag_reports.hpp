// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/lag_reports.hpp — a sink whose committed positions are also
// reported to Kafka, for lag tools.
//
// Under TransactionalPosition the position lives in the sink's transaction and Kafka's consumer
// group knows nothing of it: lag dashboards (kafka-consumer-groups, Burrow, ...) see no
// progress, and a group that never commits offsets is deleted as soon as it is empty, which
// restarts its generations (see the era bump in docs/adapters.md). `lag_reports<Sink>` wraps
// the sink: once a transaction has committed, the positions it stored are committed to Kafka
// asynchronously, through the source's consumer. The report is never read back as the
// position — the sink's stays the truth — and a failed report changes nothing but a counter
// (the source's background_commit_failures()).
//
//   kafka::lag_reports<Sink> reported(sink, source);
//   pipeline<Source, kafka::lag_reports<Sink>, TransactionalPosition<>> p(source, reported);
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "commit_order/adapters/kafka/detail/consumer_core.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::kafka {

namespace detail {
// Only a keyed sink has a key: a wrapped append sink must not look like it dedups.
template <class Sink, bool Keyed = !std::is_same_v<sink_key_t<Sink>, no_key>>
struct key_of {};
template <class Sink>
struct key_of<Sink, true> {
  using key_type = sink_key_t<Sink>;
};

// The wrapped sink's capabilities, exactly: the report adds no guarantee and takes none away.
// A sink that declares none leaves the wrapper without, and the pipeline's rule S6 says so (one
// error, where a check here would add a second).
template <class Sink>
struct capabilities_of {};
template <class Sink>
requires declares_capabilities<Sink>
struct capabilities_of<Sink> {
  using capabilities = capabilities_of_t<Sink>;
};
// What the wrapped sink's adapter implements, for rule S28.
template <class Sink>
struct implemented_of {};
template <class Sink>
requires requires {
  typename Sink::implemented_capabilities;
}
struct implemented_of<Sink> {
  using implemented_capabilities = typename Sink::implemented_capabilities;
};
}  // namespace detail

template <class Sink>
class lag_reports final : public detail::key_of<Sink>,
                          public detail::capabilities_of<Sink>,
                          public detail::implemented_of<Sink> {
 public:
  using row_type = typename Sink::row_type;

  /// Reports through `source`'s consumer (a group.id is needed for Kafka to keep offsets). With
  /// a single-partition source (a partition_source), every position is that of the partition it
  /// reads, whichever form the sink stores it in (a sink of a single-partition pipeline keeps
  /// it as partition 0).
  template <class Source>
  lag_reports(Sink& sink, Source& source) : sink_(&sink), client_(&source.client()) {
    if constexpr (requires { source.partition(); })
      single_ = source.partition();
  }

  // ---- rows ----------------------------------------------------------------------------------

  decltype(auto) apply(offset o, const row_type& row) requires
      requires(Sink& s, const row_type& r) {
    s.apply(offset{}, r);
  }
  { return sink_->apply(o, row); }
  decltype(auto) apply(partition_id k, offset o,
                       const row_type& row) requires partitioned_sink<Sink> {
    return sink_->apply(k, o, row);
  }

  // ---- the transaction -----------------------------------------------------------------------

  void begin() {
    staged_.clear();
    sink_->begin();
  }
  /// Commits the sink's transaction; then, the sink's positions being durable, reports them.
  void commit() {
    sink_->commit();
    client_->commit_async(staged_);
    staged_.clear();
  }
  void rollback() noexcept(noexcept(std::declval<Sink&>().rollback())) {
    staged_.clear();
    sink_->rollback();
  }

  // ---- positions, per partition ----------------------------------------------------------------

  void store_position(partition_id k, position p) requires partitioned_transactional_sink<Sink> {
    sink_->store_position(k, p);
    stage(k, p);
  }
  void store_position(partition_id k, position p, epoch e) requires partitioned_fencing_sink<Sink> {
    sink_->store_position(k, p, e);
    stage(k, p);
  }
  /// With the fingerprint of the record the position follows: the recreated-topic check of a
  /// fingerprinting sink (fingerprinting_sink) holds behind the report as without it.
  void store_position(partition_id k, position p, epoch e,
                      std::uint64_t f) requires fingerprinting_sink<Sink> {
    sink_->store_position(k, p, e, f);
    stage(k, p);
  }
  [[nodiscard]] std::optional<std::uint64_t> claimed_fingerprint() const requires
      fingerprinting_sink<Sink> {
    return sink_->claimed_fingerprint();
  }
  [[nodiscard]] std::optional<position> load_position(partition_id k) const requires
      partitioned_transactional_sink<Sink> {
    return sink_->load_position(k);
  }
  std::optional<position> claim(partition_id k, epoch e) requires partitioned_fencing_sink<Sink> {
    return sink_->claim(k, e);
  }
  claimed claim_next(partition_id k) requires partitioned_fencing_sink<Sink> {
    return sink_->claim_next(k);
  }

  // ---- positions, of a single-partition sink ---------------------------------------------------

  void store_position(position p) requires commit_order::transactional_sink<Sink> {
    sink_->store_position(p);
    stage(partition_id{0}, p);
  }
  void store_position(position p, epoch e) requires fencing_sink<Sink> {
    sink_->store_position(p, e);
    stage(partition_id{0}, p);
  }
  [[nodiscard]] std::optional<position> load_position() const requires
      commit_order::transactional_sink<Sink> {
    return sink_->load_position();
  }
  std::optional<position> claim(epoch e) requires fencing_sink<Sink> { return sink_->claim(e); }
  claimed claim_next() requires fencing_sink<Sink> { return sink_->claim_next(); }

  // ---- what the sink knows besides -------------------------------------------------------------

  // What the position rows are bound to: the source, the table, the database.
  void bind_source(const std::string& identity) requires source_bound_sink<Sink> {
    sink_->bind_source(identity);
  }
  [[nodiscard]] std::string bound_table() const requires table_bound_sink<Sink> {
    return sink_->bound_table();
  }
  [[nodiscard]] std::string bound_database() const requires database_bound_sink<Sink> {
    return sink_->bound_database();
  }

  [[nodiscard]] std::int64_t era() const requires stream_registry<Sink> {
    return static_cast<std::int64_t>(sink_->era());
  }
  void check_partition_count(std::size_t n) requires stream_registry<Sink> {
    sink_->check_partition_count(n);
  }
  [[nodiscard]] std::optional<offset> applied_watermark(partition_id k) const requires
      partitioned_watermarked_sink<Sink> {
    return sink_->applied_watermark(k);
  }
  [[nodiscard]] std::optional<offset> applied_watermark() const requires watermarked_sink<Sink> {
    return sink_->applied_watermark();
  }
  [[nodiscard]] std::size_t max_transaction_rows() const requires runtime_limited_sink<Sink> {
    return sink_->max_transaction_rows();
  }

  [[nodiscard]] Sink& inner() noexcept { return *sink_; }

 private:
  void stage(partition_id pipeline_partition, position p) {
    const partition_id k = single_.value_or(pipeline_partition);
    for (start_at& s : staged_) {
      if (s.partition == k) {
        s.at = p;
        return;
      }
    }
    staged_.push_back(start_at{k, p});
  }

  Sink* sink_;
  detail::client_core* client_;
  std::optional<partition_id> single_;  // the partition a single-partition source reads
  std::vector<start_at> staged_;
};

}  // namespace commit_order::kafka
