// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/errors.hpp — what the Kafka adapter reports instead of guessing.
//
// Every failure of librdkafka, the brokers or the group coordinator is a `client_error` (an
// infrastructure_error: never the record's fault, the position does not move past it) carrying
// librdkafka's error code. Errors the client recovers from by itself (a dropped connection, a
// leader that moved, a coordinator being elected) are retried without skipping a record and
// counted, never thrown; what it cannot recover from is thrown, typed.
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::kafka {

/// A librdkafka call, a broker or the group coordinator failed. `code()` is librdkafka's.
class client_error : public infrastructure_error {
 public:
  client_error(const std::string& operation, rd_kafka_resp_err_t code,
               const std::string& detail = {})
      : infrastructure_error(describe(operation, code, detail)), code_(code) {}

  [[nodiscard]] rd_kafka_resp_err_t code() const noexcept { return code_; }
  /// librdkafka's name of the code, e.g. "ILLEGAL_GENERATION" or "_TRANSPORT".
  [[nodiscard]] const char* code_name() const noexcept { return rd_kafka_err2name(code_); }

 private:
  static std::string describe(const std::string& operation, rd_kafka_resp_err_t code,
                              const std::string& detail) {
    std::string s = "commit_order::kafka: " + operation + " failed: " + rd_kafka_err2name(code) +
                    " (" + rd_kafka_err2str(code) + ")";
    if (!detail.empty())
      s += "; " + detail;
    return s;
  }

  rd_kafka_resp_err_t code_;
};

/// What one partition of an offset commit came to: `code` NO_ERROR when the coordinator
/// accepted `at`.
struct partition_outcome final {
  partition_id partition;
  position at;
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  [[nodiscard]] bool committed() const noexcept { return code == RD_KAFKA_RESP_ERR_NO_ERROR; }
};

/// The group coordinator refused an offset commit: this member's generation is stale, it is no
/// longer a member, or the group is rebalancing (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
/// REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID). A unit's positions are committed in one request;
/// `outcomes()` says, per partition, what was committed, and the message says what that means
/// under the policy: a refused partition's records are read again from its last accepted
/// commit; an accepted one's, when the policy commits before the write, are lost if the write
/// does not follow. `partition()` and `at()` are the first refused partition's.
class commit_refused : public client_error {
 public:
  commit_refused(const std::string& topic, std::vector<partition_outcome> outcomes,
                 std::string_view policy, bool commits_before_write)
      : client_error("committing the unit's positions of topic " + topic, first_refusal(outcomes),
                     describe(outcomes, policy, commits_before_write))
      , outcomes_(std::move(outcomes)) {}

  [[nodiscard]] const std::vector<partition_outcome>& outcomes() const noexcept {
    return outcomes_;
  }
  [[nodiscard]] partition_id partition() const noexcept { return refused().partition; }
  [[nodiscard]] position at() const noexcept { return refused().at; }

 private:
  const partition_outcome& refused() const noexcept {
    for (const partition_outcome& o : outcomes_)
      if (!o.committed())
        return o;
    return outcomes_.front();
  }

  static rd_kafka_resp_err_t first_refusal(const std::vector<partition_outcome>& outcomes) {
    for (const partition_outcome& o : outcomes)
      if (!o.committed())
        return o.code;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
  }

  static std::string describe(const std::vector<partition_outcome>& outcomes,
                              std::string_view policy, bool commits_before_write) {
    std::string s = "the group coordinator checks the member and its generation";
    for (const partition_outcome& o : outcomes) {
      s += "; partition " + std::to_string(o.partition.value()) + ": ";
      if (o.committed()) {
        s += "committed at " + std::to_string(o.at.value());
        s += commits_before_write
                 ? " before the write (" + std::string(policy) +
                       "), and the unit is not written: its records before " +
                       std::to_string(o.at.value()) + " that were not written before are lost"
                 : " after its records were written (" + std::string(policy) + ")";
      } else {
        s += std::string("refused (") + rd_kafka_err2name(o.code) + ") at " +
             std::to_string(o.at.value()) + ": not committed, its records since the last " +
             "accepted commit are read again by the partition's next owner" +
             (commits_before_write ? " (the unit is not written)" : " (the sink absorbs them)");
      }
    }
    return s;
  }

  std::vector<partition_outcome> outcomes_;
};

/// A commit refused because the consumer group is changing hands (REBALANCE_IN_PROGRESS, or a
/// generation or membership a rebalance superseded), in every partition of the request: the
/// world's, and it passes. The pipeline does not stop on it (commit_interrupted): the position
/// is not believed committed, the unit is read again after the rebalance, and
/// `pipeline::refused_commits()` counts it.
class rebalance_refused final : public commit_refused, public commit_interrupted {
 public:
  using commit_refused::commit_refused;
};

/// A partition failed for good while it was being read (its topic was deleted, the client is
/// not authorised to read it, librdkafka raised a fatal error): the pipeline stops, with the
/// position where the last commit left it.
class partition_failed final : public client_error {
 public:
  partition_failed(partition_id partition, rd_kafka_resp_err_t code, const std::string& detail)
      : client_error("reading partition " + std::to_string(partition.value()), code, detail)
      , partition_(partition) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }

 private:
  partition_id partition_;
};

/// The consumer configuration contradicts what the pipeline's policy needs (auto-commit under a
/// policy that commits after the write, an auto.offset.reset that would skip records, ...).
/// Refused, never silently overridden: the message names the property and what to do.
class configuration_refused final : public error {
 public:
  using error::error;
};

/// A message's payload cannot be decoded into the event type. The source stops before it (the
/// records before it are delivered first): a poison message is the producer's bug to fix, or a
/// codec returning a variant lets the transform and the error handling deal with it.
class undecodable_message final : public error {
 public:
  undecodable_message(partition_id partition, offset at, const std::string& why)
      : error("commit_order::kafka: the message at offset " + std::to_string(at.value()) +
              " of partition " + std::to_string(partition.value()) + " cannot be decoded: " + why)
      , partition_(partition)
      , at_(at) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  [[nodiscard]] offset at() const noexcept { return at_; }

 private:
  partition_id partition_;
  offset at_;
};

/// A producer transaction outlived `transaction.timeout.ms`: the transaction coordinator aborted
/// it and bumped the producer's epoch, so the producer answers as if fenced, though no other
/// owner took anything. Told apart from a zombie because the sink knows when the unit began:
/// the unit is not committed (read again from the last committed position), and the way out is
/// a smaller unit (settings.batch_size) or a longer `producer_options::transaction_timeout`.
class transaction_timed_out final : public client_error {
 public:
  transaction_timed_out(const std::string& operation, rd_kafka_resp_err_t code,
                        std::chrono::milliseconds elapsed, std::chrono::milliseconds timeout)
      : client_error(operation, code,
                     "the unit ran " + std::to_string(elapsed.count()) +
                         " ms, past transaction.timeout.ms=" + std::to_string(timeout.count()) +
                         ": the broker aborted the transaction -- nothing of the unit is "
                         "visible to read_committed readers; make units smaller "
                         "(settings.batch_size) or the timeout longer")
      , elapsed_(elapsed)
      , timeout_(timeout) {}

  [[nodiscard]] std::chrono::milliseconds elapsed() const noexcept { return elapsed_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  std::chrono::milliseconds elapsed_;
  std::chrono::milliseconds timeout_;
};

/// A transaction's commit was sent and its answer did not come within the request timeout:
/// whether the unit committed is unknown (outcome_unknown), so the pipeline does not do it again
/// in place. The sink finishes the commit (librdkafka's commit_transaction, called again) before
/// its next transaction begins, and recovery then reads the group's offsets: read on from if
/// it committed, redone if it did not.
class commit_in_doubt final : public client_error, public commit_order::outcome_unknown {
 public:
  commit_in_doubt(rd_kafka_resp_err_t code, const std::string& detail)
      : client_error("committing a producer transaction", code,
                     detail +
                         "; whether the unit committed is unknown -- the commit is finished "
                         "before the next transaction, and recovery reads the group's "
                         "offsets") {}
};

/// librdkafka refused a row's message before sending it (larger than message.max.bytes): the
/// record's fault, not the world's, so error handling can skip it or send it to the dead
/// letters. The transaction is unharmed.
class message_refused final : public error {
 public:
  message_refused(partition_id partition, offset at, rd_kafka_resp_err_t code,
                  const std::string& why)
      : error("commit_order::kafka: the message made of the record at offset " +
              std::to_string(at.value()) + " of partition " + std::to_string(partition.value()) +
              " was refused: " + rd_kafka_err2name(code) + " (" + why + ")")
      , partition_(partition)
      , at_(at)
      , code_(code) {}

  [[nodiscard]] partition_id partition() const noexcept { return partition_; }
  [[nodiscard]] offset at() const noexcept { return at_; }
  [[nodiscard]] rd_kafka_resp_err_t code() const noexcept { return code_; }

 private:
  partition_id partition_;
  offset at_;
  rd_kafka_resp_err_t code_;
};

/// librdkafka's serialised consumer-group metadata is not in the format this adapter reads the
/// group generation from (librdkafka 2.0.2 has no getter for it). Reading a wrong number would
/// make a wrong owner epoch, so the adapter stops instead.
class unknown_group_metadata final : public error {
 public:
  explicit unknown_group_metadata(const std::string& why)
      : error(
            "commit_order::kafka: cannot read the group generation from librdkafka's "
            "consumer-group metadata: " +
            why + " (this adapter reads the \"CGMDv2:\" format of librdkafka 2.0.x)") {}
};

}  // namespace commit_order::kafka
