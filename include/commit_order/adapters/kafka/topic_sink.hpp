// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/topic_sink.hpp — a topic as the sink of AtLeastOnce: every row
// becomes a message, and the position moves once the brokers have them all.
//
//   kafka::topic_sink<Row, Layout>
//
// The producer is idempotent with acks=all: its own retries never write a message twice or out
// of order. apply() hands a row's message to librdkafka; flush(), which the pipeline calls at
// the end of each unit's write step, returns once every message of the unit is acknowledged
// by every in-sync replica, and throws otherwise, so the position never passes a message the
// brokers do not have. What it cannot prevent is the consumer's replay: a crash after the
// messages and before the position appends the unit again. The topic then holds duplicate
// runs (A1 A2 A1 A2), at new offsets, and the sink declares so (Emits): the pipeline's
// guarantee stays MayDuplicate, and whoever reads the topic must absorb them by a key carried
// from the event (an offset guard cannot: the copies have offsets of their own). Exactly once
// is kafka::transactional_sink, under TransactionalPosition.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "commit_order/adapters/kafka/detail/client.hpp"
#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/layout.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::kafka {

/// What an at-least-once topic producer is told.
struct topic_sink_options final {
  /// librdkafka properties (bootstrap.servers, ...). enable.idempotence and acks are the
  /// sink's: setting them otherwise, under any spelling, is refused.
  properties config{};
  /// How long the end of a unit waits for the brokers to acknowledge its messages. Past it the
  /// unit fails (the world's failure): its position is not committed, and its records are read
  /// again.
  std::chrono::milliseconds flush_timeout{60000};
};

/// A Kafka topic written at least once: idempotent producer, position after acknowledgement.
template <class Row, class Layout>
class topic_sink final {
  static constexpr bool maps_rows = layout<Layout, Row>;
  static_assert(part_rules::require<part_rules::kafka_layout_maps_row, maps_rows>());
  static constexpr bool members_called = !maps_rows || detail::layout_members_called<Layout, Row>;
  static_assert(part_rules::require<part_rules::kafka_layout_members, members_called>());

 public:
  using row_type = Row;
  using key_type = no_key;
  /// A log that another hop reads: every write appends, and a replay appends a copy its readers
  /// see (Emits, which R3 accepts under a replaying policy). Flushed: a row is durable once
  /// flush() returns (a wrapper must forward it: S30). Replicated: acks=all.
  using capabilities = commit_order::capabilities<AppendOnly, Emits, Flushed, Replicated>;

  topic_sink(Layout layout, topic_sink_options options)
      : writer_(std::move(layout)), options_(std::move(options)) {
    if (options_.flush_timeout <= std::chrono::milliseconds{0} ||
        options_.flush_timeout.count() > std::numeric_limits<int>::max())
      throw configuration_refused(
          "commit_order::kafka::topic_sink: topic_sink_options.flush_timeout must be positive "
          "and at most " +
          std::to_string(std::numeric_limits<int>::max()) + " ms (librdkafka takes an int)");
    char err[512];
    if (options_.config.contains("transactional.id"))
      throw configuration_refused(
          "commit_order::kafka::topic_sink: transactional.id is set in topic_sink_options.config: "
          "a transactional producer refuses every message sent outside a transaction -- for "
          "exactly once, use kafka::transactional_sink under TransactionalPosition");
    detail::conf_ptr conf = detail::producer_conf(options_.config, {}, "topic_sink_options.config");
    rd_kafka_conf_set_dr_msg_cb(conf.get(), &topic_sink::delivered);
    rd_kafka_conf_set_opaque(conf.get(), this);
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err);
    if (rk == nullptr)
      throw configuration_refused(std::string("commit_order::kafka::topic_sink: ") + err);
    (void)conf.release();
    rk_.reset(rk);
  }

  topic_sink(const topic_sink&) = delete;
  topic_sink& operator=(const topic_sink&) = delete;
  /// What is still unacknowledged belongs to a unit that failed before its flush: under a
  /// write-first policy its position was not committed, and it is read again, so it is purged
  /// rather than waited for (under AtMostOnce the position went first: that is the loss the
  /// policy declares).
  ~topic_sink() {
    if (rk_) {
      (void)rd_kafka_purge(rk_.get(), RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      (void)rd_kafka_flush(rk_.get(), 1000);  // serves the purged messages' reports
    }
  }

  /// Hands the message `row` (of record `o` of partition `k`) becomes to the producer.
  void apply(partition_id k, offset o, const Row& row) {
    if constexpr (maps_rows) {
      rethrow_if_dead();
      in_flight_.push_back(sent{k, o});
      detail::error_ptr e;
      try {
        e = writer_.produce(rk_.get(), k, o, row, tag(in_flight_.size()));
      } catch (...) {
        in_flight_.pop_back();  // refused before it was sent (message_refused)
        throw;
      }
      if (e) {
        in_flight_.pop_back();
        const rd_kafka_resp_err_t code = rd_kafka_error_code(e.get());
        if (rd_kafka_error_is_fatal(e.get()))
          die("producing to " + writer_.topic(), code, rd_kafka_error_string(e.get()));
        throw client_error("producing to " + writer_.topic(), code, rd_kafka_error_string(e.get()));
      }
      ++produced_;
    }
  }

  /// Returns once every message handed over since the last flush is acknowledged. Otherwise
  /// throws, naming the first record (in the unit's order) whose message the brokers do not
  /// have: `row_failed` when the message itself was refused (the record's fault), a
  /// `client_error` for a timeout or any other failure (the world's). Either way the unit's
  /// position is not committed past it; the records before it were acknowledged.
  void flush() {
    rethrow_if_dead();
    const rd_kafka_resp_err_t waited =
        rd_kafka_flush(rk_.get(), static_cast<int>(options_.flush_timeout.count()));
    if (waited != RD_KAFKA_RESP_ERR_NO_ERROR) {
      const int left = rd_kafka_outq_len(rk_.get());
      const sent first = in_flight_.empty() ? sent{} : in_flight_.front();
      forget_unit();
      throw client_error("waiting for the brokers to acknowledge a unit's messages", waited,
                         std::to_string(left) + " still unacknowledged after " +
                             std::to_string(options_.flush_timeout.count()) +
                             " ms (topic_sink_options.flush_timeout), from the record at "
                             "offset " +
                             std::to_string(first.at.value()) + " of partition " +
                             std::to_string(first.partition.value()) +
                             " on: the unit's position is not committed, and its records are "
                             "read again");
    }
    if (first_failed_ == none) {
      forget_unit();
      return;
    }
    const sent bad = in_flight_[first_failed_];
    const rd_kafka_resp_err_t code = failed_code_;
    const std::string why = failed_why_;
    forget_unit();
    if (rd_kafka_fatal_error(rk_.get(), nullptr, 0) != RD_KAFKA_RESP_ERR_NO_ERROR)
      die("delivering the message of the record at offset " + std::to_string(bad.at.value()) +
              " of partition " + std::to_string(bad.partition.value()),
          code, why);
    if (refused_for_itself(code))
      throw row_failed(bad.partition, bad.at,
                       std::string("the brokers refused its message (or the batch that held "
                                   "it, of which it is the first failed in the unit): ") +
                           rd_kafka_err2name(code) + " (" + why + ")");
    throw client_error(
        "delivering the message of the record at offset " + std::to_string(bad.at.value()) +
            " of partition " + std::to_string(bad.partition.value()),
        code, "the unit's position is not committed, and its records are read again");
  }

  // ---- what the sink counts -----------------------------------------------------------------

  /// Messages handed to the producer so far.
  [[nodiscard]] std::size_t produced() const noexcept { return produced_; }
  /// Messages the brokers acknowledged so far.
  [[nodiscard]] std::size_t acknowledged() const noexcept { return acknowledged_; }
  /// Messages whose delivery failed so far.
  [[nodiscard]] std::size_t failed_deliveries() const noexcept { return failed_deliveries_; }
  [[nodiscard]] const topic_sink_options& options() const noexcept { return options_; }

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);

  /// A message handed over in this unit: the record it was made of.
  struct sent final {
    partition_id partition{0};
    offset at{0};
  };

  /// Refusals of the message itself, whoever sends it: the record's, not the world's.
  static constexpr bool refused_for_itself(rd_kafka_resp_err_t c) noexcept {
    return c == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE || c == RD_KAFKA_RESP_ERR_INVALID_RECORD ||
           c == RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE;
  }

  /// A message's opaque: the unit it was handed over in (the low 32 bits of the count of units
  /// the sink forgot) and its place there, from 1.
  [[nodiscard]] void* tag(std::size_t place) const noexcept {
    const std::uint64_t unit = units_ & 0xffff'ffffu;
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(unit << 32 | place));
  }

  /// librdkafka's delivery report, served inside rd_kafka_flush and rd_kafka_poll (on this
  /// thread).
  static void delivered(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<topic_sink*>(opaque);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++self->acknowledged_;
      return;
    }
    ++self->failed_deliveries_;
    const auto t = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(m->_private));
    const std::uint64_t place = t & 0xffff'ffffu;
    // A report of a unit forgotten after its flush timed out: that unit was not committed.
    if ((t >> 32) != (self->units_ & 0xffff'ffffu) || place == 0 || place > self->in_flight_.size())
      return;
    const std::size_t i = static_cast<std::size_t>(place - 1);
    if (self->first_failed_ == none || i < self->first_failed_) {
      self->first_failed_ = i;
      self->failed_code_ = m->err;
      self->failed_why_ = rd_kafka_err2str(m->err);
    }
  }

  void forget_unit() noexcept {
    ++units_;
    in_flight_.clear();
    first_failed_ = none;
    failed_why_.clear();
  }

  [[noreturn]] void die(const std::string& operation, rd_kafka_resp_err_t code,
                        const std::string& why) {
    char fatal[512];
    const rd_kafka_resp_err_t cause = rd_kafka_fatal_error(rk_.get(), fatal, sizeof fatal);
    dead_ = std::make_exception_ptr(
        client_error(operation, cause == RD_KAFKA_RESP_ERR_NO_ERROR ? code : cause,
                     (cause == RD_KAFKA_RESP_ERR_NO_ERROR ? why : std::string(fatal)) +
                         " (fatal: the producer cannot be used again -- restart the consumer; "
                         "the unit's position was not committed)"));
    std::rethrow_exception(dead_);
  }

  void rethrow_if_dead() const {
    if (dead_)
      std::rethrow_exception(dead_);
  }

  detail::message_writer<Row, Layout> writer_;
  topic_sink_options options_;
  detail::handle_ptr rk_;
  std::vector<sent> in_flight_;  // this unit's messages, in the order they were handed over
  std::size_t first_failed_ = none;
  rd_kafka_resp_err_t failed_code_ = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string failed_why_;
  std::exception_ptr dead_;
  std::uint64_t units_ = 0;
  std::size_t produced_ = 0;
  std::size_t acknowledged_ = 0;
  std::size_t failed_deliveries_ = 0;
};

}  // namespace commit_order::kafka
