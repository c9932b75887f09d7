// SPDX-License-Identifier: BSL-1.0
// Consumer processes reading a topic of the real broker (the fixture's), really killed: 200
// SIGKILLs across the four policies, each child connecting with a manual assignment and
// restarted until it has consumed the topic, then its SQLite table reconciled against what was
// produced (a topic of the run's own, written with acks=all). The same runs as
// tests/kafka/crash_test.cpp, where the mock cluster is the broker. Then Kafka into PostgreSQL
// (a throwaway server with fsync=on): a ledger under TransactionalPosition and AtLeastOnce,
// consumers killed mid-unit, every order reconciled against the topic. Then Kafka into another
// topic: kafka::transactional_sink (a group member whose offsets commit in its producer's
// transactions) and kafka::topic_sink, the output read back by read_committed and
// read_uncommitted readers.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "support/crash_runs.hpp"
#include "support/lab/pg_server.hpp"
#include "support/lab/report.hpp"
#include "support/lab/supervisor.hpp"
#include "support/scratch.hpp"

namespace {

/// The fixture's broker.
std::string bootstrap() {
  const char* file = std::getenv("CO_KAFKA_BOOTSTRAP_FILE");
  REQUIRE_MESSAGE(file != nullptr, "CO_KAFKA_BOOTSTRAP_FILE is not set (run through ctest)");
  std::ifstream in(file);
  std::string address;
  REQUIRE_MESSAGE(static_cast<bool>(in >> address),
                  "no broker address in " << file << ": the fixture kafka_broker.start failed");
  return address;
}

crash_lab::policy_outcome run(crash_lab::policy_id policy, int kills, std::int64_t records,
                              const test_support::scratch_dir& dir,
                              const std::string& pg_conninfo = {}, bool into_topic = false) {
  auto config = test_support::crash_config(policy, kills, records, 20261204, dir);
  config.source = crash_lab::source_kind::kafka;
  config.kafka_bootstrap = bootstrap();
  if (into_topic) {
    config.sink = crash_lab::sink_kind::kafka;
    return test_support::run_crash_lab(config, policy, " (Kafka broker into another topic)");
  }
  if (!pg_conninfo.empty()) {
    config.sink = crash_lab::sink_kind::postgres;
    config.pg_conninfo = pg_conninfo;
    return test_support::run_crash_lab(config, policy, " (Kafka broker into PostgreSQL)");
  }
  return test_support::run_crash_lab(config, policy, " (Kafka broker)");
}

}  // namespace

TEST_CASE(
    "broker, TransactionalPosition under 50 SIGKILLs: nothing lost, duplicated or "
    "regressed") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::transactional, 50, 2000, dir);
  CHECK(o.kills == 50);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  CHECK(o.replays_absorbed == 0);  // exactly once in the sink's state: nothing re-applied
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("broker, AtLeastOnce under 50 SIGKILLs: replays absorbed, nothing lost or duplicated") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_least_once, 50, 2000, dir);
  CHECK(o.kills == 50);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);
  CHECK(o.replays_absorbed > 0);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("broker, AtMostOnce under 50 SIGKILLs: committed to Kafka first, loss bounded per kill") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once, 50, 2000, dir);
  CHECK(o.kills == 50);
  test_support::check_loss_accounted(o, 50);
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE("broker, AtMostOnce<AutoCommit> under 50 SIGKILLs on librdkafka's auto-commit") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once_auto, 50, 2000, dir);
  CHECK(o.kills == 50);
  CHECK(o.duplicate_rows == 0);  // the keyed sink R1 demands
  CHECK(crash_lab::violations(o, 8).empty());
}

TEST_CASE(
    "broker into PostgreSQL: TransactionalPosition and AtLeastOnce under 25 SIGKILLs each, "
    "the ledger reconciled against the topic") {
  crash_lab::pg_server server(crash_lab::pg_server_options{.fsync = true});
  {
    test_support::scratch_dir dir;
    const auto o = run(crash_lab::policy_id::transactional, 25, 1000, dir, server.conninfo());
    CHECK(o.kills == 25);
    CHECK(o.rows_lost == 0);
    CHECK(o.duplicate_rows == 0);
    CHECK(o.regressed_rows == 0);
    CHECK(o.replays_absorbed == 0);
    CHECK(crash_lab::violations(o, 8).empty());
  }
  {
    test_support::scratch_dir dir;
    const auto o = run(crash_lab::policy_id::at_least_once, 25, 1000, dir, server.conninfo());
    CHECK(o.kills == 25);
    CHECK(o.rows_lost == 0);
    CHECK(o.duplicate_rows == 0);
    CHECK(o.regressed_rows == 0);
    CHECK(crash_lab::violations(o, 8).empty());
  }
}

TEST_CASE(
    "broker into another topic: TransactionalPosition under 60 SIGKILLs mid-transaction, each "
    "record once to a read_committed reader") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::transactional, 60, 1200, dir, {}, true);
  CHECK(o.kills == 60);
  CHECK(o.rows_lost == 0);
  CHECK(o.duplicate_rows == 0);
  CHECK(o.regressed_rows == 0);  // in order per order id
  // Not a failure: a read_uncommitted reader is shown what the transactions the kills left open
  // had produced, which each successor's producer aborted. With 60 kills, most of them inside
  // the wait for a commit, some are certain to have left messages behind.
  MESSAGE(o.aborted_messages << " aborted messages seen by a read_uncommitted reader");
  CHECK(o.aborted_messages > 0);
  CHECK(crash_lab::violations(o, test_support::crash_batch).empty());
}

TEST_CASE(
    "broker into another topic: AtLeastOnce under 20 SIGKILLs, nothing lost, runs written "
    "twice") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_least_once, 20, 800, dir, {}, true);
  CHECK(o.kills == 20);
  CHECK(o.rows_lost == 0);
  CHECK(o.aborted_messages == 0);
  // The type says MayDuplicate, and the topic shows it: a kill between the acknowledgement and
  // the commit appends the unit again. At most one unit per kill (violations checks it).
  MESSAGE(o.duplicate_rows << " messages written twice, " << o.regressed_rows
                           << " orders seen going back");
  CHECK(crash_lab::violations(o, test_support::crash_batch).empty());
}

TEST_CASE("broker into another topic: AtMostOnce under 20 SIGKILLs, loss bounded per kill") {
  test_support::scratch_dir dir;
  const auto o = run(crash_lab::policy_id::at_most_once, 20, 800, dir, {}, true);
  CHECK(o.kills == 20);
  test_support::check_loss_accounted(o, 20);
  CHECK(crash_lab::violations(o, test_support::crash_batch).empty());
}
