// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/detail/consumer_core.hpp — one librdkafka consumer, as the
// sources use it (private).
//
// `client_core` owns the handle and the requests the adapter makes itself (watermarks,
// metadata, committed offsets, commits); `consumer_core<Event, Codec>` adds the batches, the
// positions it hands out, and the rebalance protocol. Both live on the heap: librdkafka's C
// callbacks get their address.
//
// Invariants that keep a record from being skipped:
//   * a partition starts exactly where the pipeline said (explicit offsets in the assign
//     list, or a seek), never at a committed or reset offset;
//   * a message taken from librdkafka but not handed out (a batch abandoned because a callback
//     failed, a message polled while an assignment is being re-delivered, an undecodable one)
//     is "unread": its partition is sought back to the first offset not handed out;
//   * an exception never crosses librdkafka's C code: callbacks catch, keep it, and make the
//     poll return; it is rethrown after rd_kafka_consumer_poll returns;
//   * a partition started at a position p the pipeline expects a record before (expect_before)
//     starts at p - 1: that record is compared and dropped, never handed out, and a different
//     one stops the source (offset_reused) with the partition still at p - 1.
#pragma once

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "commit_order/adapters/kafka/codec.hpp"
#include "commit_order/adapters/kafka/detail/client.hpp"
#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"

namespace commit_order::kafka::detail {

/// FNV-1a, 64 bits, over bytes. A fingerprint is stored beside a position and compared by a
/// later process, maybe of a later version of the library: so the function is spelled out here
/// (integers fed as little-endian bytes, whatever the host's order) and must never change.
class fnv1a64 final {
 public:
  void add(std::span<const std::byte> bytes) noexcept {
    for (const std::byte b : bytes) {
      h_ ^= static_cast<std::uint8_t>(b);
      h_ *= 0x100000001b3ULL;
    }
  }
  void add(std::uint64_t v) noexcept {
    std::array<std::byte, 8> bytes;
    for (std::size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    add(bytes);
  }
  [[nodiscard]] std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

/// What tells a Kafka record from another at the same offset (librdkafka 2.0.2 has no topic
/// ids, so a topic deleted and recreated under its name is otherwise the same): FNV-1a over
/// its timestamp (type and value), its key and its value, each of those with a presence flag
/// and its length, so a null key differs from an empty one and bytes cannot move between the
/// key and the value. The partition and offset are not in it: they are what it is checked at.
inline std::uint64_t message_fingerprint(const rd_kafka_message_t& m) noexcept {
  rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  const std::int64_t timestamp = rd_kafka_message_timestamp(&m, &type);
  fnv1a64 h;
  h.add(static_cast<std::uint64_t>(type));
  h.add(static_cast<std::uint64_t>(timestamp));
  const auto field = [&h](const void* data, std::size_t size) {
    h.add(std::uint64_t{data != nullptr ? 1U : 0U});
    h.add(static_cast<std::uint64_t>(size));
    if (data != nullptr)
      h.add(std::span(static_cast<const std::byte*>(data), size));
  };
  field(m.key, m.key_len);
  field(m.payload, m.len);
  return h.value();
}

/// Erases the elements of `batch` for which `drop` holds, and the elements of `beside` at the
/// same indices: `beside` is kept aligned with `batch` (empty: left empty).
template <class T, class U, class Pred>
void erase_aligned(std::vector<T>& batch, std::vector<U>& beside, Pred drop) {
  if (beside.empty()) {
    std::erase_if(batch, drop);
    return;
  }
  if (beside.size() != batch.size())
    throw std::logic_error("commit_order::kafka: a batch and its fingerprints are not aligned");
  std::size_t kept = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (drop(std::as_const(batch[i])))
      continue;
    if (kept != i) {
      batch[kept] = std::move(batch[i]);
      beside[kept] = std::move(beside[i]);
    }
    ++kept;
  }
  batch.erase(batch.begin() + static_cast<std::ptrdiff_t>(kept), batch.end());
  beside.erase(beside.begin() + static_cast<std::ptrdiff_t>(kept), beside.end());
}

/// The handle, its configuration, and the requests the adapter makes on its own behalf.
class client_core {
 public:
  client_core(const consumer_options& o, assignment_kind kind, commit_mode mode,
              std::chrono::milliseconds auto_commit_interval, std::string_view policy_name,
              bool commits_before_write)
      : options_(o)
      , kind_(kind)
      , mode_(mode)
      , policy_name_(policy_name)
      , commits_before_write_(commits_before_write) {
    resolved_config r = resolve(o, kind, mode, auto_commit_interval, policy_name);
    group_id_ = r.group_id;
    rebalance_ = r.rebalance;
    conf_ptr conf = build_conf(r, policy_name);
    char err[512];
    rd_kafka_conf_set_opaque(conf.get(), this);
    rd_kafka_conf_set_error_cb(conf.get(), &client_core::error_cb);
    // Results of commits nobody waits for (librdkafka's auto-commit, asynchronous reports):
    // their failures are counted, not lost. Synchronous commits report to their caller.
    rd_kafka_conf_set_offset_commit_cb(conf.get(), &client_core::offset_commit_cb);
    if (kind == assignment_kind::group)
      rd_kafka_conf_set_rebalance_cb(conf.get(), &client_core::rebalance_cb);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), err, sizeof err);
    if (rk == nullptr)
      throw configuration_refused(std::string("commit_order::kafka: creating the consumer: ") +
                                  err);
    (void)conf.release();  // rd_kafka_new took it
    rk_.reset(rk);
    // Everything the client reports (errors, rebalances, commit results) is served by
    // rd_kafka_consumer_poll, on the polling thread.
    rd_kafka_poll_set_consumer(rk_.get());
    reports_.reset(rd_kafka_queue_get_consumer(rk_.get()));
    topic_.reset(rd_kafka_topic_new(rk_.get(), o.topic.c_str(), nullptr));
    if (!topic_)
      throw client_error("creating the topic handle for " + o.topic, rd_kafka_last_error());
  }

  client_core(const client_core&) = delete;
  client_core& operator=(const client_core&) = delete;
  virtual ~client_core() = default;

  [[nodiscard]] rd_kafka_t* handle() const noexcept { return rk_.get(); }
  [[nodiscard]] const std::string& topic() const noexcept { return options_.topic; }
  [[nodiscard]] const std::string& group_id() const noexcept { return group_id_; }
  [[nodiscard]] commit_mode mode() const noexcept { return mode_; }
  [[nodiscard]] assignment_kind kind() const noexcept { return kind_; }
  [[nodiscard]] protocol rebalance_protocol() const noexcept { return rebalance_; }
  [[nodiscard]] const consumer_options& options() const noexcept { return options_; }
  /// What the positions stored for this consumer were read from (the sources' identity()):
  /// the topic, and a group member's group.
  [[nodiscard]] std::string identity() const {
    std::string out = "kafka topic '" + topic() + "'";
    if (kind_ == assignment_kind::group)
      out += ", group '" + group_id() + "'";
    return out;
  }

  /// Partition k's low and high watermarks: the first retained offset and the offset past the
  /// last message.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> watermarks(partition_id k) const {
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    const auto e = retrying(options_.request_timeout, [&](int ms) {
      return rd_kafka_query_watermark_offsets(rk_.get(), topic().c_str(), k.value(), &lo, &hi, ms);
    });
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error(
          "querying the watermarks of " + topic() + " partition " + std::to_string(k.value()), e);
    return {lo, hi};
  }

  /// The topic's partition count, from the cluster's metadata.
  [[nodiscard]] std::size_t partition_count() const {
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_resp_err_t topic_error = RD_KAFKA_RESP_ERR_NO_ERROR;
    const auto e = retrying(options_.request_timeout, [&](int ms) {
      const auto r = rd_kafka_metadata(rk_.get(), 0, topic_.get(), &md, ms);
      if (r != RD_KAFKA_RESP_ERR_NO_ERROR)
        return r;
      topic_error = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
      if (topic_error == RD_KAFKA_RESP_ERR_NO_ERROR)
        return r;
      rd_kafka_metadata_destroy(md);
      md = nullptr;
      // A topic being created is unknown for a moment: worth retrying until the budget ends.
      return topic_error == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
                 ? RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE
                 : topic_error;
    });
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error(
          "reading the metadata of topic " + topic(),
          topic_error != RD_KAFKA_RESP_ERR_NO_ERROR ? topic_error : e,
          topic_error == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? "the topic does not exist" : "");
    const auto n = static_cast<std::size_t>(md->topics[0].partition_cnt);
    rd_kafka_metadata_destroy(md);
    return n;
  }

  /// The offset committed to Kafka for partition k by this consumer's group (none yet: empty).
  [[nodiscard]] std::optional<position> committed(partition_id k) const {
    require_group("reading committed offsets");
    list_ptr list = make_list(1);
    rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), k.value());
    const auto e = retrying(options_.request_timeout, [&](int ms) {
      const auto r = rd_kafka_committed(rk_.get(), list.get(), ms);
      return r != RD_KAFKA_RESP_ERR_NO_ERROR ? r : list->elems[0].err;
    });
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error("reading the committed offset of " + topic() + " partition " +
                             std::to_string(k.value()) + " for group " + group_id_,
                         e);
    const std::int64_t o = list->elems[0].offset;
    if (o < 0)  // RD_KAFKA_OFFSET_INVALID: the group never committed this partition
      return std::nullopt;
    return position{o};
  }

  /// Commits p for partition k and returns once the coordinator accepted it. The coordinator
  /// checks this member's generation (inside a group): a refusal is `commit_refused`.
  void commit_sync(partition_id k, position p) {
    const start_at one{k, p};
    commit_sync(std::span(&one, 1));
  }

  /// Commits every partition's position in one request and returns once the coordinator has
  /// accepted them all. Kafka checks the member and its generation once per request, so a
  /// rebalance refuses the whole request, never one partition of it: `rebalance_refused`
  /// (commit_interrupted) for a group member; another refusal, or a partial one, is
  /// `commit_refused` with each partition's outcome.
  void commit_sync(std::span<const start_at> positions) {
    if (positions.empty())
      return;
    require_group("committing offsets");
    list_ptr list = make_list(static_cast<int>(positions.size()));
    for (const start_at& s : positions)
      rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), s.partition.value())->offset =
          s.at.value();
    sync_commit_result r;
    const auto e = retrying(options_.request_timeout, [&](int) {
      // rd_kafka_commit_queue with no queue waits for the result and hands it, per partition,
      // to this call's own callback (not to the offset_commit_cb, which counts only commits
      // nobody waits for).
      r = sync_commit_result{};
      r.codes.assign(positions.size(), RD_KAFKA_RESP_ERR_NO_ERROR);
      r.topic = &topic();
      r.positions = positions;
      const auto overall =
          rd_kafka_commit_queue(rk_.get(), list.get(), nullptr, &client_core::sync_commit_cb, &r);
      if (overall != RD_KAFKA_RESP_ERR_NO_ERROR)
        return overall;
      return r.first_error();
    });
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
      return;
    std::vector<partition_outcome> outcomes;
    outcomes.reserve(positions.size());
    bool any_refusal = false;
    bool all_rebalance = true;
    for (std::size_t i = 0; i < positions.size(); ++i) {
      // An overall error with no partition's own: every partition had it.
      const rd_kafka_resp_err_t code = r.answered ? r.codes[i] : e;
      outcomes.push_back(partition_outcome{positions[i].partition, positions[i].at, code});
      any_refusal = any_refusal || is_refusal(code);
      all_rebalance = all_rebalance && is_rebalance(code);
    }
    if (all_rebalance && kind_ == assignment_kind::group)
      throw rebalance_refused(topic(), std::move(outcomes), policy_name_, commits_before_write_);
    if (any_refusal)
      throw commit_refused(topic(), std::move(outcomes), policy_name_, commits_before_write_);
    std::string which;
    for (const partition_outcome& o : outcomes)
      which += (which.empty() ? "" : ", ") + std::to_string(o.partition.value()) + "@" +
               std::to_string(o.at.value()) + (o.committed() ? " committed" : " not committed");
    throw client_error(
        "committing positions of " + topic() + " (partition@position: " + which + ")", e);
  }

  /// Hands p for partition k to librdkafka's offset store: its auto-commit timer commits it
  /// (AtMostOnce<AutoCommit>), asynchronously, whenever it next fires.
  void store_for_auto_commit(partition_id k, position p) {
    list_ptr list = make_list(1);
    rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), k.value())->offset = p.value();
    auto e = rd_kafka_offsets_store(rk_.get(), list.get());
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
      e = list->elems[0].err;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error("storing position " + std::to_string(p.value()) + " of " + topic() +
                             " partition " + std::to_string(k.value()) +
                             " for librdkafka's auto-commit",
                         e, "librdkafka stores offsets only for partitions assigned to it now");
  }

  /// Reports positions to the group asynchronously, for lag tools only: never read back as the
  /// position. librdkafka keeps no order between asynchronous commits (one it retries after a
  /// backoff lands after the next one), so one report is in flight at a time and those made
  /// meanwhile are merged into the next, the latest position of each partition kept: the
  /// group's offsets only move forward, and the last report is always sent. Answers are served
  /// by the consumer's poll.
  void commit_async(std::span<const start_at> positions) {
    if (positions.empty() || group_id_.empty())
      return;
    for (const start_at& s : positions) {
      auto same = std::ranges::find(report_pending_, s.partition, &start_at::partition);
      if (same != report_pending_.end())
        same->at = s.at;
      else
        report_pending_.push_back(s);
    }
    if (!report_in_flight_)
      send_report();
  }

  /// Transient errors seen so far (retried, never thrown).
  [[nodiscard]] std::size_t transient_errors() const noexcept { return transient_count_; }
  /// The most recent transient error (code NO_ERROR: none yet).
  [[nodiscard]] const transient_error& last_transient_error() const noexcept {
    return last_transient_;
  }
  /// Failed commits nobody waited for: librdkafka's auto-commits and asynchronous reports.
  [[nodiscard]] std::size_t background_commit_failures() const noexcept {
    return background_commit_failures_;
  }
  [[nodiscard]] rd_kafka_resp_err_t last_background_commit_error() const noexcept {
    return last_background_commit_error_;
  }

 protected:
  void require_group(const char* what) const {
    if (group_id_.empty())
      throw configuration_refused(std::string("commit_order::kafka: ") + what +
                                  " needs a consumer group: set group.id");
  }

  void note_transient(rd_kafka_resp_err_t code, std::string reason) {
    ++transient_count_;
    last_transient_ = transient_error{code, std::move(reason)};
    if (options_.on_transient_error)
      options_.on_transient_error(last_transient_);
  }

  /// Forgets the reports not yet sent of partitions this member no longer owns: sent later,
  /// under the member's next generation, one could move the group's offset back past what the
  /// partition's new owner committed.
  void drop_reports(std::span<const partition_id> ks) {
    std::erase_if(report_pending_, [&](const start_at& s) {
      return std::ranges::find(ks, s.partition) != ks.end();
    });
  }
  void drop_reports() noexcept { report_pending_.clear(); }

  /// Before the consumer closes: serves the answers to the reports in flight (each answer sends
  /// the reports merged meanwhile) until none is left or `request_timeout` passes, so that a
  /// clean shutdown leaves the group at the last position reported. librdkafka's close does not
  /// send them: it purges commits still waiting for the coordinator. What is still unanswered
  /// at the deadline is counted as a failure (__TIMED_OUT).
  void finish_reports() {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + options_.request_timeout;
    while (report_in_flight_ && clock::now() < deadline)
      message_ptr{rd_kafka_consumer_poll(rk_.get(), 50)};  // closing: nothing is handed out
    if (report_in_flight_ || !report_pending_.empty())
      note_background_commit_failure(RD_KAFKA_RESP_ERR__TIMED_OUT);
  }

  void note_background_commit_failure(rd_kafka_resp_err_t e) {
    ++background_commit_failures_;
    last_background_commit_error_ = e;
  }

  /// The rebalance callback, for a group-managed consumer. Must not throw.
  virtual void on_rebalance(rd_kafka_resp_err_t err,
                            rd_kafka_topic_partition_list_t* partitions) noexcept = 0;
  /// A fatal error of the client: kept, and thrown from the next poll. Must not throw.
  virtual void on_fatal(std::exception_ptr e) noexcept = 0;

 private:
  // Each partition's answer, in the order of the request's positions.
  struct sync_commit_result {
    const std::string* topic = nullptr;
    std::span<const start_at> positions;
    std::vector<rd_kafka_resp_err_t> codes;
    rd_kafka_resp_err_t overall = RD_KAFKA_RESP_ERR_NO_ERROR;
    bool answered = false;  // the callback ran with the partitions' own answers

    [[nodiscard]] rd_kafka_resp_err_t first_error() const noexcept {
      if (overall != RD_KAFKA_RESP_ERR_NO_ERROR && !answered)
        return overall;
      for (const rd_kafka_resp_err_t c : codes)
        if (c != RD_KAFKA_RESP_ERR_NO_ERROR)
          return c;
      return overall;
    }
  };

  static void sync_commit_cb(rd_kafka_t*, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t* offsets, void* opaque) noexcept {
    auto* r = static_cast<sync_commit_result*>(opaque);
    r->overall = err;
    if (offsets == nullptr)
      return;
    r->answered = true;
    for (std::size_t i = 0; i < r->positions.size(); ++i) {
      // The request's partitions, each with its own error (an error of the whole request is
      // set on every partition by librdkafka).
      rd_kafka_resp_err_t code = err;
      for (int j = 0; j < offsets->cnt; ++j) {
        const rd_kafka_topic_partition_t& p = offsets->elems[j];
        if (p.partition == r->positions[i].partition.value() && *r->topic == p.topic) {
          code = p.err;
          break;
        }
      }
      r->codes[i] = code;
    }
  }

  static void error_cb(rd_kafka_t* rk, int err, const char* reason, void* opaque) noexcept {
    auto* self = static_cast<client_core*>(opaque);
    const auto code = static_cast<rd_kafka_resp_err_t>(err);
    if (code == RD_KAFKA_RESP_ERR__FATAL) {
      char why[512];
      const auto original = rd_kafka_fatal_error(rk, why, sizeof why);
      try {
        self->on_fatal(std::make_exception_ptr(client_error("the Kafka client", original, why)));
      } catch (...) {
        self->on_fatal(std::current_exception());
      }
      return;
    }
    try {
      self->note_transient(code, reason != nullptr ? reason : "");
    } catch (...) {
      // The user's observer threw: that is the user's failure, surfaced from the next poll.
      self->on_fatal(std::current_exception());
    }
  }

  void send_report() {
    list_ptr list = make_list(static_cast<int>(report_pending_.size()));
    for (const start_at& s : report_pending_)
      rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), s.partition.value())->offset =
          s.at.value();
    report_pending_.clear();
    const auto e =
        rd_kafka_commit_queue(rk_.get(), list.get(), reports_.get(), &client_core::report_cb, this);
    report_in_flight_ = e == RD_KAFKA_RESP_ERR_NO_ERROR;
    if (!report_in_flight_)
      note_background_commit_failure(e);
  }

  static void report_cb(rd_kafka_t*, rd_kafka_resp_err_t err,
                        rd_kafka_topic_partition_list_t* offsets, void* opaque) noexcept {
    auto* self = static_cast<client_core*>(opaque);
    self->report_in_flight_ = false;
    self->note_commit_answer(err, offsets);
    if (self->report_pending_.empty())
      return;
    try {
      self->send_report();
    } catch (...) {
      self->on_fatal(std::current_exception());
    }
  }

  void note_commit_answer(rd_kafka_resp_err_t err,
                          const rd_kafka_topic_partition_list_t* offsets) noexcept {
    // _NO_OFFSET: an auto-commit with nothing stored yet, not a failure.
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
      note_background_commit_failure(err);
      return;
    }
    if (offsets != nullptr)
      for (int i = 0; i < offsets->cnt; ++i)
        if (offsets->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
          note_background_commit_failure(offsets->elems[i].err);
  }

  static void offset_commit_cb(rd_kafka_t*, rd_kafka_resp_err_t err,
                               rd_kafka_topic_partition_list_t* offsets, void* opaque) noexcept {
    static_cast<client_core*>(opaque)->note_commit_answer(err, offsets);
  }

  static void rebalance_cb(rd_kafka_t*, rd_kafka_resp_err_t err,
                           rd_kafka_topic_partition_list_t* partitions, void* opaque) noexcept {
    static_cast<client_core*>(opaque)->on_rebalance(err, partitions);
  }

  consumer_options options_;
  assignment_kind kind_;
  commit_mode mode_;
  std::string policy_name_;    // for what a refused commit means under it
  bool commits_before_write_;  // the policy commits the position before the write (loses)
  protocol rebalance_ = protocol::eager;
  std::string group_id_;
  std::size_t transient_count_ = 0;
  transient_error last_transient_;
  std::size_t background_commit_failures_ = 0;
  rd_kafka_resp_err_t last_background_commit_error_ = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::vector<start_at> report_pending_;  // reports made while one was in flight, merged
  bool report_in_flight_ = false;

 protected:
  // Declared last, so that every member above is alive while the handle closes (its callbacks
  // use them).
  handle_ptr rk_;
  topic_ptr topic_;

 private:
  queue_ptr reports_;  // the consumer's queue, where the answers to reports are served
};

/// A consumer that hands out decoded records in batches, and keeps the rebalance protocol.
template <class Event, class Codec>
class consumer_core final : public client_core {
 public:
  using record_type = partitioned_logged<Event>;

  /// A manually assigned consumer of `partitions`, or (empty, kind group) a group member that
  /// subscribes to the topic.
  consumer_core(const consumer_options& o, assignment_kind kind, commit_mode mode,
                std::chrono::milliseconds auto_commit_interval, std::string_view policy_name,
                bool commits_before_write, std::vector<partition_id> partitions = {})
      : client_core(o, kind, mode, auto_commit_interval, policy_name, commits_before_write) {
    if (kind == assignment_kind::manual) {
      std::ranges::sort(partitions);
      if (std::ranges::adjacent_find(partitions) != partitions.end())
        throw std::invalid_argument("commit_order::kafka: a partition is listed twice");
      const std::size_t count = partition_count();
      for (const partition_id k : partitions) {
        if (k.value() < 0 || static_cast<std::size_t>(k.value()) >= count)
          throw std::invalid_argument("commit_order::kafka: topic " + o.topic + " has " +
                                      std::to_string(count) + " partitions, no partition " +
                                      std::to_string(k.value()));
        // Until the pipeline seeks it, a partition starts at its first retained message.
        owned_.push_back(part{k, RD_KAFKA_OFFSET_BEGINNING, RD_KAFKA_OFFSET_BEGINNING});
      }
    } else {
      list_ptr t = make_list(1);
      rd_kafka_topic_partition_list_add(t.get(), o.topic.c_str(), RD_KAFKA_PARTITION_UA);
      if (const auto e = rd_kafka_subscribe(rk_.get(), t.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR)
        throw client_error("subscribing to " + o.topic, e);
    }
  }

  ~consumer_core() override {
    // The pipeline that listened may be gone: a revoke during the close tells nobody (nothing
    // is open between polls; the positions are where the last commit left them).
    listener_ = nullptr;
    try {
      close();
    } catch (...) {
      // A destructor cannot report; close() explicitly to see the error.
    }
  }

  // ---- the source interface --------------------------------------------------------------

  void listen(assignment_listener& l) {
    listener_ = &l;
    // The pipeline trusts nothing of an assignment it took before (it calls listen() again as
    // it recovers from a failure): what this member owns is delivered again, and each partition
    // restarts where the listener says.
    if (!owned_.empty())
      redeliver_owned_ = true;
  }

  void seek(partition_id k, position p) {
    part* q = find(k);
    if (q == nullptr)
      throw std::invalid_argument("commit_order::kafka: partition " + std::to_string(k.value()) +
                                  " of " + topic() + " is not assigned to this consumer");
    start(*q, p.value());
  }

  /// From now on, the fingerprint of every record handed out is kept (fingerprint()). Off by
  /// default: the batches of a consumer that does not ask are not hashed.
  void keep_fingerprints() noexcept { keep_fingerprints_ = true; }

  /// The fingerprint (message_fingerprint) of `r`, a record of the span the last poll returned.
  [[nodiscard]] std::uint64_t fingerprint(const record_type& r) const {
    if (!keep_fingerprints_)
      throw std::logic_error(
          "commit_order::kafka: fingerprint() of a consumer that does not keep them (call "
          "keep_fingerprints() before polling)");
    const std::less<const record_type*> before;
    const record_type* const first = batch_.data();
    if (batch_.empty() || before(&r, first) || !before(&r, first + batch_.size()))
      throw std::logic_error(
          "commit_order::kafka: fingerprint() of a record that is not in the last poll's batch");
    const auto i = static_cast<std::size_t>(&r - first);
    if (i >= fingerprints_.size())
      throw std::logic_error(
          "commit_order::kafka: fingerprint() of a record read before keep_fingerprints()");
    return fingerprints_[i];
  }

  /// The record before `p` in partition k must have fingerprint `fingerprint` (the one stored
  /// beside p). The next time k is started at exactly p (by the listener's answer, by a
  /// redelivery or by seek), it starts at p - 1 instead: that record is compared and dropped,
  /// and reading goes on at p; a different record stops the source with offset_reused, every
  /// time, k still at p - 1. When that record is gone (compacted away, a transaction's marker,
  /// or deleted by retention with p still in the log), nothing is compared. A start of k at
  /// another position, or k revoked or lost, forgets the expectation. One per partition: a new
  /// one replaces the last.
  void expect_before(partition_id k, position p, std::uint64_t fingerprint) {
    if (p.value() < 1)
      throw std::invalid_argument("commit_order::kafka: expect_before(partition " +
                                  std::to_string(k.value()) + ", position " +
                                  std::to_string(p.value()) + "): there is no record before it");
    const expectation e{k, p.value(), fingerprint};
    if (const auto it = std::ranges::find(expected_, k, &expectation::k); it != expected_.end())
      *it = e;
    else
      expected_.push_back(e);
  }

  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    if (closed_)
      throw std::logic_error("commit_order::kafka: poll after close");
    if (kind() == assignment_kind::group && listener_ == nullptr)
      throw std::logic_error(
          "commit_order::kafka: poll before listen (a group-managed source tells a pipeline "
          "about its partitions)");
    clear_batch();
    if (deferred_)
      std::rethrow_exception(std::exchange(deferred_, nullptr));
    rethrow_callback_error();
    if (kind() == assignment_kind::manual && !started_)
      start_manual();
    apply_seeks();
    if (redeliver_owned_ || pending_) {
      // librdkafka may have news (a revoke, a lost assignment) that makes the redelivery moot:
      // it is served first. A message it hands over now is not handed out: unread.
      if (message_ptr m{rd_kafka_consumer_poll(rk_.get(), 0)})
        unread(*m);
      rethrow_callback_error();
      redeliver();
      apply_seeks();
    }
    fill(max);
    return batch_;
  }

  /// The offsets from `p` that will never hold a record: `p` lies between the position after
  /// partition k's last record handed out and the offset where librdkafka reached the
  /// partition's end since (under read_committed, a transaction's control marker and an aborted
  /// transaction's records take offsets and are never delivered). Nothing while a seek or a
  /// comparison is pending.
  [[nodiscard]] std::optional<gap> gap_after(partition_id k, position p) const {
    const part* q = find(k);
    if (q == nullptr || q->verify || q->seek_to != no_seek || q->gap_from < 0 ||
        p.value() < q->gap_from || p.value() >= q->next)
      return std::nullopt;
    return gap{position{q->next}};
  }

  [[nodiscard]] position earliest(partition_id k) const { return position{watermarks(k).first}; }
  [[nodiscard]] position end(partition_id k) const { return position{watermarks(k).second}; }

  /// The partitions this consumer owns now (acknowledged by the listener), ascending.
  [[nodiscard]] std::vector<partition_id> assignment() const {
    std::vector<partition_id> out;
    out.reserve(owned_.size());
    for (const part& q : owned_)
      out.push_back(q.k);
    return out;
  }

  /// The generation of the assignment this consumer acts on (group-managed, once assigned).
  [[nodiscard]] std::optional<std::int32_t> generation() const noexcept { return generation_; }

  /// Leaves in good order: unsubscribes, lets the revoke reach the listener (if any), waits
  /// for the assignment to empty, then closes. (With cooperative-sticky, librdkafka 2.0.2's
  /// rd_kafka_consumer_close can hang when an assignment arrives while it closes, #4527:
  /// unsubscribing and draining first is the known workaround.) A static member
  /// (`group.instance.id`) does not unsubscribe: librdkafka 2.0.2 sends LeaveGroup on
  /// unsubscribe even for a static member, and the group would rebalance; closed directly, the
  /// member keeps its partitions for session.timeout.ms, and a restart under the same instance
  /// id takes them back at the same generation (KIP-345).
  void close() {
    if (closed_)
      return;
    closing_ = true;
    clear_batch();
    expected_.clear();
    finish_reports();
    std::exception_ptr first;
    if (kind() == assignment_kind::group && !options().config.contains("group.instance.id")) {
      rd_kafka_unsubscribe(rk_.get());
      using clock = std::chrono::steady_clock;
      const auto deadline = clock::now() + options().request_timeout;
      while (clock::now() < deadline) {
        if (message_ptr m{rd_kafka_consumer_poll(rk_.get(), 50)}) {
          // Nothing is handed out any more; the positions stay where they were committed.
        }
        if (callback_error_ && !first)
          first = std::exchange(callback_error_, nullptr);
        rd_kafka_topic_partition_list_t* a = nullptr;
        const bool empty = rd_kafka_assignment(rk_.get(), &a) == RD_KAFKA_RESP_ERR_NO_ERROR &&
                           a != nullptr && a->cnt == 0;
        if (a != nullptr)
          rd_kafka_topic_partition_list_destroy(a);
        if (empty && owned_.empty())
          break;
      }
    }
    const auto e = rd_kafka_consumer_close(rk_.get());
    closed_ = true;
    owned_.clear();
    if (first)
      std::rethrow_exception(first);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error("closing the consumer", e);
  }

  [[nodiscard]] bool closed() const noexcept { return closed_; }

 private:
  /// The fingerprint the record before position `at` of partition k must have.
  struct expectation {
    partition_id k;
    std::int64_t at;
    std::uint64_t fingerprint;
  };

  struct part {
    partition_id k;
    std::int64_t next;     ///< the offset of the first message not handed out
    std::int64_t seek_to;  ///< a seek to apply before the next fetch (INVALID: none)
    /// Started at verify->at - 1 (= next) to compare that record: none taken yet.
    std::optional<expectation> verify = std::nullopt;
    /// The offset `next` was when librdkafka reached the partition's end further on (next
    /// moved there): no record lies in [gap_from, next), only a transaction's markers or an
    /// aborted transaction's records. -1 once a record is taken, or the partition started.
    std::int64_t gap_from = -1;
  };
  static constexpr std::int64_t no_seek = RD_KAFKA_OFFSET_INVALID;

  struct pending_assignment {
    std::vector<partition_id> partitions;
    std::int32_t generation;
  };

  part* find(partition_id k) noexcept {
    for (part& q : owned_)
      if (q.k == k)
        return &q;
    return nullptr;
  }
  const part* find(partition_id k) const noexcept {
    for (const part& q : owned_)
      if (q.k == k)
        return &q;
    return nullptr;
  }

  // The expectation for starting k at p, if one was registered for exactly p; any start of k
  // uses up what was registered for it.
  std::optional<expectation> expectation_for(partition_id k, std::int64_t p) const {
    const auto it = std::ranges::find(expected_, k, &expectation::k);
    if (it == expected_.end() || it->at != p)
      return std::nullopt;
    return *it;
  }
  void forget_expectations(std::span<const partition_id> ks) {
    std::erase_if(expected_,
                  [&](const expectation& e) { return std::ranges::find(ks, e.k) != ks.end(); });
  }

  // Partition q starts at p: at p - 1 when the record there is to be compared first.
  void start(part& q, std::int64_t p) {
    q.verify = expectation_for(q.k, p);
    forget_expectations(std::span(&q.k, 1));
    q.next = q.verify ? p - 1 : p;
    q.seek_to = q.next;
    q.gap_from = -1;
  }

  void clear_batch() noexcept {
    batch_.clear();
    fingerprints_.clear();
  }

  void rethrow_callback_error() {
    if (callback_error_)
      std::rethrow_exception(std::exchange(callback_error_, nullptr));
  }

  void on_fatal(std::exception_ptr e) noexcept override {
    if (!callback_error_)
      callback_error_ = std::move(e);
    rd_kafka_yield(rk_.get());
  }

  // ---- manual assignment -------------------------------------------------------------------

  void start_manual() {
    list_ptr list = make_list(static_cast<int>(owned_.size()));
    for (part& q : owned_) {
      rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), q.k.value())->offset = q.next;
      q.seek_to = no_seek;
    }
    if (const auto e = rd_kafka_assign(rk_.get(), list.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw client_error("assigning partitions of " + topic(), e);
    started_ = true;
  }

  // Seeks asked for since the last fetch, in one call. Asynchronous: librdkafka raises each
  // partition's version barrier at once, so no message fetched before the seek is handed out.
  void apply_seeks() {
    list_ptr list;
    for (part& q : owned_) {
      if (q.seek_to == no_seek)
        continue;
      if (!list)
        list = make_list(static_cast<int>(owned_.size()));
      rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), q.k.value())->offset =
          q.seek_to;
      q.seek_to = no_seek;
    }
    if (!list)
      return;
    error_ptr e{rd_kafka_seek_partitions(rk_.get(), list.get(), 0)};
    if (e)
      throw client_error("seeking partitions of " + topic(), rd_kafka_error_code(e.get()),
                         rd_kafka_error_string(e.get()));
    for (int i = 0; i < list->cnt; ++i) {
      const auto pe = list->elems[i].err;
      if (pe != RD_KAFKA_RESP_ERR_NO_ERROR && pe != RD_KAFKA_RESP_ERR__IN_PROGRESS)
        throw client_error(
            "seeking partition " + std::to_string(list->elems[i].partition) + " of " + topic(), pe);
    }
  }

  // Partition q, stopped by librdkafka, reads again from q.next. Under auto.offset.reset=error
  // librdkafka stops a partition whose fetch was out of range, and ignores a seek of a
  // partition it is not fetching (the seek fails asynchronously, and nothing more arrives). A
  // manual assignment is started again whole at the next poll (start_manual, at each
  // partition's next offset, which a seek before that poll sets). A group member's is only
  // sought: assigning it again outside the rebalance callback would race with the group's own
  // assignment and with the seeks that follow (a seek made while librdkafka restarts its
  // fetchers is lost, and the partition resumes past records never handed out), and would
  // clear a lost assignment's flag. So a group member's stopped partition waits for its next
  // assignment, a visible stall, never a skip.
  void restart(part& q) {
    if (kind() == assignment_kind::manual) {
      started_ = false;
      return;
    }
    q.seek_to = q.next;
  }

  // A message taken from librdkafka and not handed out: its partition reads it again.
  void unread(const rd_kafka_message_t& m) {
    if (m.err != RD_KAFKA_RESP_ERR_NO_ERROR)
      return;
    if (part* q = find(partition_id{m.partition}); q != nullptr && m.offset >= q->next)
      q->seek_to = q->next;
  }

  // The batch being built is abandoned: each partition reads again from its first record in it.
  void unread_batch() {
    for (auto it = batch_.rbegin(); it != batch_.rend(); ++it) {
      if (part* q = find(it->source_partition)) {
        q->next = it->source_offset.value();
        q->seek_to = q->next;
        q->gap_from = -1;
      }
    }
    clear_batch();
  }

  // ---- reading -------------------------------------------------------------------------------

  void fill(std::size_t max) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + options().poll_wait;
    while (batch_.size() < max) {
      int wait = 0;
      if (batch_.empty()) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
        wait = static_cast<int>(std::max<std::int64_t>(left, 0));
      }
      message_ptr m{rd_kafka_consumer_poll(rk_.get(), wait)};
      if (callback_error_) {
        // A callback failed (the listener threw, the client failed): nothing of this poll is
        // handed out, and what was taken is read again.
        if (m)
          unread(*m);
        unread_batch();
        rethrow_callback_error();
      }
      if (!m) {
        if (!batch_.empty() || wait == 0)
          return;
        continue;
      }
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (!on_error(*m))
          return;
        continue;
      }
      if (!take(*m))
        return;
    }
  }

  // Appends the message to the batch; false when the batch must end here.
  bool take(const rd_kafka_message_t& m) {
    part* q = find(partition_id{m.partition});
    // Not owned (revoked since it was fetched), or handed out already (before a seek back):
    // nothing to hand out.
    if (q == nullptr || m.offset < q->next)
      return true;
    if (q->verify && !verified(*q, m))
      return false;
    if (m.offset < q->next)
      return true;  // the record compared: dropped
    // Aligned with the batch from its first record (keep_fingerprints() called while a batch
    // is being built takes effect with the next one).
    const bool keep = keep_fingerprints_ && fingerprints_.size() == batch_.size();
    try {
      batch_.push_back(record_type{partition_id{m.partition}, offset{m.offset}, decode_one(m)});
    } catch (const commit_order::infrastructure_error&) {
      // The world failed in the decoder (a lookup that is down), not the message: the same
      // error stops the source, and the message is read again.
      q->next = m.offset;
      q->seek_to = m.offset;
      fail(std::current_exception());
      return false;
    } catch (const std::exception& e) {
      // The records before it are handed out first; the bad one stops the source when it is
      // next, and is never skipped.
      q->next = m.offset;
      q->seek_to = m.offset;
      fail(std::make_exception_ptr(
          undecodable_message(partition_id{m.partition}, offset{m.offset}, e.what())));
      return false;
    }
    if (keep) {
      try {
        fingerprints_.push_back(message_fingerprint(m));
      } catch (...) {
        batch_.pop_back();
        throw;
      }
    }
    q->next = m.offset + 1;
    q->gap_from = -1;
    return true;
  }

  static Event decode_one(const rd_kafka_message_t& m) {
    if constexpr (decoder<Codec, Event>)
      return kafka::decode<Event, Codec>(message(m));
    else  // never compiled into a program: the source's constructor refuses such a codec
      throw std::logic_error("commit_order::kafka: the codec does not decode the event");
  }

  // The first message of a partition started to compare the record before its position. The
  // record at p - 1 is compared: the same, it is dropped (next = p); another, the source fails
  // and the partition stays at p - 1, so the next attempt compares it again. A later offset
  // means the record at p - 1 is gone (compacted, or a transaction's marker, which takes an
  // offset and is never delivered): nothing to compare, and the message is read as any other.
  // False when the batch must end here.
  bool verified(part& q, const rd_kafka_message_t& m) {
    const expectation e = *q.verify;
    q.verify.reset();
    if (m.offset != e.at - 1)
      return true;
    const std::uint64_t found = message_fingerprint(m);
    if (found == e.fingerprint) {
      q.next = e.at;
      return true;
    }
    q.verify = e;
    q.seek_to = q.next;
    fail(std::make_exception_ptr(
        offset_reused(identity(), q.k, position{e.at}, offset{m.offset}, e.fingerprint, found)));
    return false;
  }

  // An error message from the consumer; false when the batch must end here.
  bool on_error(const rd_kafka_message_t& m) {
    const rd_kafka_resp_err_t e = m.err;
    const partition_id k{m.partition};
    if (e == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      // Every message before m.offset has been taken from librdkafka (it keeps a partition's
      // messages in order, and drops those fetched before a seek): what was not handed out is
      // no record at all.
      if (part* q = find(k);
          q != nullptr && !q->verify && q->seek_to == no_seek && m.offset > q->next) {
        if (q->gap_from < 0)
          q->gap_from = q->next;
        q->next = m.offset;
      }
      return true;
    }
    if (e == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET && m.rkt != nullptr) {
      // auto.offset.reset=error: the fetch position is outside the log. librdkafka stops the
      // partition until it is sought again.
      part* q = find(k);
      if (q == nullptr)
        return true;  // a partition given up since
      const auto [lo, hi] = watermarks(k);
      const std::int64_t at = m.offset >= 0 ? m.offset : q->next;
      // Started at p - 1 to compare the record there: the position stored is p, and it is p an
      // error names.
      const std::int64_t stored = q->verify ? q->verify->at : at;
      if (q->verify && lo == stored) {
        // Retention deleted exactly the record to compare since the pipeline checked p: nothing
        // to compare, and p is still the first record retained.
        q->verify.reset();
        q->next = stored;
        q->gap_from = -1;
        restart(*q);
        return true;
      }
      if (at < lo) {
        restart(*q);  // read again wherever the pipeline seeks it next
        fail(std::make_exception_ptr(position_lost(k, position{stored}, position{lo})));
        return false;
      }
      if (at > hi) {
        restart(*q);
        fail(std::make_exception_ptr(position_beyond_end(k, position{stored}, position{hi})));
        return false;
      }
      // Inside the log after all (a broker that answered out of range for a moment): read on
      // from exactly where it was.
      restart(*q);
      note_transient(e, rd_kafka_message_errstr(&m));
      return true;
    }
    if (is_transient(e) || e == RD_KAFKA_RESP_ERR__MAX_POLL_EXCEEDED) {
      // The client retries by itself (MAX_POLL_EXCEEDED: a revoke with the assignment lost
      // follows, on this thread).
      note_transient(e, rd_kafka_message_errstr(&m));
      return true;
    }
    const std::string why = rd_kafka_message_errstr(&m);
    if (m.rkt != nullptr && m.partition >= 0)
      fail(std::make_exception_ptr(partition_failed(k, e, why)));
    else
      fail(std::make_exception_ptr(client_error("consuming " + topic(), e, why)));
    return false;
  }

  // A failure while reading: the batch so far is handed out, the failure comes with the next
  // poll (at once, when there is nothing to hand out).
  void fail(std::exception_ptr e) {
    if (batch_.empty())
      std::rethrow_exception(e);
    deferred_ = std::move(e);
  }

  // ---- the rebalance protocol ----------------------------------------------------------------

  void on_rebalance(rd_kafka_resp_err_t err,
                    rd_kafka_topic_partition_list_t* partitions) noexcept override {
    try {
      if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        on_assign(partitions);
      } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        on_revoke(partitions);
      } else {
        // Anything else: nothing can be trusted of the assignment; give it all up.
        std::vector<partition_id> all = assignment();
        owned_.clear();
        expected_.clear();
        pending_.reset();
        drop_reports();
        unassign_all(partitions);
        if (listener_ != nullptr && !all.empty())
          listener_->lost(all);
        throw client_error("the group's rebalance", err);
      }
    } catch (...) {
      if (!callback_error_)
        callback_error_ = std::current_exception();
      rd_kafka_yield(rk_.get());
    }
  }

  std::vector<partition_id> ours(const rd_kafka_topic_partition_list_t* list) const {
    std::vector<partition_id> ks;
    if (list != nullptr)
      for (int i = 0; i < list->cnt; ++i)
        if (topic() == list->elems[i].topic)
          ks.push_back(partition_id{list->elems[i].partition});
    std::ranges::sort(ks);
    return ks;
  }

  void on_assign(rd_kafka_topic_partition_list_t* partitions) {
    if (listener_ == nullptr || closing_) {
      // Closing: librdkafka must finish its protocol, but nothing is handed out any more.
      assign_as_given(partitions);
      return;
    }
    pending_ = pending_assignment{ours(partitions), read_generation(rk_.get(), group_id())};
    accept_pending();
  }

  // The listener takes the pending assignment (claims, loads positions); then, and only then,
  // librdkafka is given it, each partition at exactly the position the listener returned. If
  // the listener throws, nothing is assigned and the next poll delivers it again.
  void accept_pending() {
    const std::vector<start_at> starts =
        listener_->assigned(pending_->partitions, pending_->generation);
    list_ptr list = make_list(static_cast<int>(pending_->partitions.size() + owned_.size()));
    std::vector<part> taken;
    for (const partition_id k : pending_->partitions) {
      const auto s = std::ranges::find(starts, k, &start_at::partition);
      if (s == starts.end())
        throw std::logic_error(
            "commit_order::kafka: the listener returned no position for "
            "partition " +
            std::to_string(k.value()));
      // Used up only once librdkafka took the assignment: if it fails, the next poll delivers it
      // again, and the listener registers again.
      std::optional<expectation> verify = expectation_for(k, s->at.value());
      const std::int64_t at = verify ? s->at.value() - 1 : s->at.value();
      rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), k.value())->offset = at;
      taken.push_back(part{k, at, no_seek, verify});
    }
    if (rebalance_protocol() == protocol::cooperative) {
      error_ptr e{rd_kafka_incremental_assign(rk_.get(), list.get())};
      if (e)
        throw client_error("assigning partitions of " + topic(), rd_kafka_error_code(e.get()),
                           rd_kafka_error_string(e.get()));
    } else {
      // Eager: the list is the whole assignment (everything was revoked before it).
      for (const part& q : owned_)
        rd_kafka_topic_partition_list_add(list.get(), topic().c_str(), q.k.value())->offset =
            q.next;
      if (const auto e = rd_kafka_assign(rk_.get(), list.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR)
        throw client_error("assigning partitions of " + topic(), e);
    }
    forget_expectations(pending_->partitions);
    for (const part& q : taken)
      owned_.push_back(q);
    std::ranges::sort(owned_, {}, &part::k);
    generation_ = pending_->generation;
    pending_.reset();
  }

  void on_revoke(rd_kafka_topic_partition_list_t* partitions) {
    const bool lost = rd_kafka_assignment_lost(rk_.get()) != 0;
    const std::vector<partition_id> ks = ours(partitions);
    std::vector<partition_id> give_up;
    for (const partition_id k : ks)
      if (find(k) != nullptr)
        give_up.push_back(k);
    // Records of them in the batch being built are not handed out: their next owner reads them.
    erase_aligned(batch_, fingerprints_, [&](const record_type& r) {
      return std::ranges::find(give_up, r.source_partition) != give_up.end();
    });
    // What the pipeline expected of them is for this member's start, which will not come.
    forget_expectations(ks);
    drop_reports(ks);
    if (pending_) {
      std::erase_if(pending_->partitions,
                    [&](partition_id k) { return std::ranges::find(ks, k) != ks.end(); });
      if (pending_->partitions.empty())
        pending_.reset();
    }
    std::exception_ptr failed;
    if (listener_ != nullptr && !give_up.empty()) {
      try {
        if (lost)
          listener_->lost(give_up);
        else
          listener_->revoked(give_up);
      } catch (...) {
        failed = std::current_exception();  // thrown once the partitions are given up
      }
    }
    std::erase_if(owned_,
                  [&](const part& q) { return std::ranges::find(give_up, q.k) != give_up.end(); });
    // Always given up, whatever the listener did: librdkafka waits for it, and the partitions
    // are another member's now.
    unassign(partitions);
    if (failed)
      std::rethrow_exception(failed);
  }

  void unassign(rd_kafka_topic_partition_list_t* partitions) {
    if (rebalance_protocol() == protocol::cooperative) {
      error_ptr e{rd_kafka_incremental_unassign(rk_.get(), partitions)};
      if (e)
        throw client_error("unassigning partitions of " + topic(), rd_kafka_error_code(e.get()),
                           rd_kafka_error_string(e.get()));
    } else if (const auto e = rd_kafka_assign(rk_.get(), nullptr);
               e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw client_error("unassigning partitions of " + topic(), e);
    }
  }

  void unassign_all(rd_kafka_topic_partition_list_t* partitions) {
    if (rebalance_protocol() == protocol::cooperative && partitions != nullptr) {
      error_ptr e{rd_kafka_incremental_unassign(rk_.get(), partitions)};
      (void)e;  // the error that brought us here is the one reported
    } else {
      rd_kafka_assign(rk_.get(), nullptr);
    }
  }

  void assign_as_given(rd_kafka_topic_partition_list_t* partitions) {
    if (rebalance_protocol() == protocol::cooperative) {
      error_ptr e{rd_kafka_incremental_assign(rk_.get(), partitions)};
      if (e)
        throw client_error("assigning partitions while closing", rd_kafka_error_code(e.get()),
                           rd_kafka_error_string(e.get()));
    } else if (const auto e = rd_kafka_assign(rk_.get(), partitions);
               e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      throw client_error("assigning partitions while closing", e);
    }
  }

  // What the pipeline is told again after listen() or a failed assignment.
  void redeliver() {
    if (redeliver_owned_) {
      if (!owned_.empty()) {
        const std::vector<partition_id> ks = assignment();
        const std::vector<start_at> starts = listener_->assigned(ks, generation_.value_or(0));
        for (const start_at& s : starts) {
          if (part* q = find(s.partition))
            start(*q, s.at.value());
        }
      }
      redeliver_owned_ = false;
    }
    if (pending_)
      accept_pending();
  }

  assignment_listener* listener_ = nullptr;
  std::vector<part> owned_;
  std::optional<pending_assignment> pending_;
  std::optional<std::int32_t> generation_;
  std::exception_ptr callback_error_;
  std::exception_ptr deferred_;
  std::vector<record_type> batch_;
  std::vector<std::uint64_t> fingerprints_;  // batch_[i]'s is fingerprints_[i], when kept
  std::vector<expectation> expected_;        // registered, for the partitions' next start
  bool keep_fingerprints_ = false;
  bool redeliver_owned_ = false;
  bool started_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

}  // namespace commit_order::kafka::detail
