// SPDX-License-Identifier: BSL-1.0
// support/lab/policies.hpp — the four configurations the lab runs, each with the weakest
// sink its rules allow, so that whatever a policy can do wrong shows in the table:
//
//   AtMostOnce<AutoCommit>  keyed upsert, no offset guard  (R1 demands Idempotent, no more)
//                           position: a SQLite table row, committed by a 50 ms timer
//   AtMostOnce              plain append table              (no rule asks for more)
//                           position: a position file
//   AtLeastOnce             keyed upsert + offset guard     (R3 demands Idempotent)
//                           position: a position file
//   TransactionalPosition   keyed upsert + offset guard, position row in the same transaction
//                           (R4, R5 demand Transactional and OffsetGuarded)
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace crash_lab {

enum class policy_id { at_most_once_auto, at_most_once, at_least_once, transactional };

inline constexpr std::array<policy_id, 4> all_policies{
    policy_id::at_most_once_auto, policy_id::at_most_once, policy_id::at_least_once,
    policy_id::transactional};

/// The policy as the library spells it.
constexpr std::string_view display_name(policy_id p) noexcept {
  switch (p) {
    case policy_id::at_most_once_auto:
      return "AtMostOnce<AutoCommit>";
    case policy_id::at_most_once:
      return "AtMostOnce";
    case policy_id::at_least_once:
      return "AtLeastOnce";
    case policy_id::transactional:
      return "TransactionalPosition";
  }
  return "?";
}

/// The policy on a command line.
constexpr std::string_view flag_name(policy_id p) noexcept {
  switch (p) {
    case policy_id::at_most_once_auto:
      return "at-most-once-auto";
    case policy_id::at_most_once:
      return "at-most-once";
    case policy_id::at_least_once:
      return "at-least-once";
    case policy_id::transactional:
      return "transactional";
  }
  return "?";
}

inline std::optional<policy_id> parse_policy(std::string_view name) noexcept {
  for (policy_id p : all_policies)
    if (flag_name(p) == name)
      return p;
  return std::nullopt;
}

/// Whether the table is the plain append table (one row per applied record) rather than the
/// keyed orders_flat (one row per order).
constexpr bool appends(policy_id p) noexcept {
  return p == policy_id::at_most_once;
}

/// The stream name of the position row (in the sink's or the store's position table).
inline constexpr std::string_view stream_name = "orders";

/// Where the orders are: a file log, or a topic of librdkafka's mock cluster, hosted by the
/// supervisor and read by the children over loopback.
enum class source_kind { file, kafka };

constexpr std::string_view source_name(source_kind s) noexcept {
  return s == source_kind::kafka ? "kafka" : "file";
}

inline std::optional<source_kind> parse_source(std::string_view name) noexcept {
  if (name == "file")
    return source_kind::file;
  if (name == "kafka")
    return source_kind::kafka;
  return std::nullopt;
}

/// Whether, reading from Kafka, policy p keeps its position in Kafka's committed offsets:
/// AtMostOnce<AutoCommit> (librdkafka's own auto-commit) and AtMostOnce (a synchronous commit
/// before the write). AtLeastOnce keeps it in the position file: rule R9a refuses Kafka's
/// replicated offsets as the position of rows in one machine's SQLite file (a lost machine
/// would take the rows, and Kafka would still vouch for them). TransactionalPosition keeps it in
/// the SQLite transaction, as it does reading the file log.
constexpr bool position_in_kafka(policy_id p) noexcept {
  return p == policy_id::at_most_once_auto || p == policy_id::at_most_once;
}

/// Where the effects go: a table of a SQLite file or of a PostgreSQL database, or another
/// Kafka topic (read from a Kafka topic only; see child.hpp).
enum class sink_kind { sqlite, postgres, kafka };

constexpr std::string_view flag_name(sink_kind k) noexcept {
  switch (k) {
    case sink_kind::sqlite:
      return "sqlite";
    case sink_kind::postgres:
      return "postgres";
    case sink_kind::kafka:
      return "kafka";
  }
  return "?";
}

inline std::optional<sink_kind> parse_sink(std::string_view name) noexcept {
  for (sink_kind k : {sink_kind::sqlite, sink_kind::postgres, sink_kind::kafka})
    if (flag_name(k) == name)
      return k;
  return std::nullopt;
}

/// Whether policy p's effects are appended, one per applied record (the append table, or an
/// output topic under any policy), rather than upserted into orders_flat (one row per order).
constexpr bool appends(policy_id p, sink_kind k) noexcept {
  return k == sink_kind::kafka || appends(p);
}

/// Why policy p cannot run into an output topic -- on librdkafka's mock cluster when
/// `on_mock` -- or empty when it can. The lab's topic sinks (kafka::topic_sink under
/// AtMostOnce and AtLeastOnce, kafka::transactional_sink under TransactionalPosition) append.
constexpr std::string_view kafka_sink_refusal(policy_id p, bool on_mock) noexcept {
  if (p == policy_id::at_most_once_auto)
    return "rule R1 refuses it: the timer commits positions whatever was written, so the sink "
           "must be Idempotent, and a topic appends";
  if (p == policy_id::transactional && on_mock)
    return "it needs a real broker (--bootstrap): librdkafka's mock cluster neither commits "
           "offsets sent to a transaction nor hides aborted messages from read_committed readers";
  return {};
}

}  // namespace crash_lab
