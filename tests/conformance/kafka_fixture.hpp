// SPDX-License-Identifier: BSL-1.0
// The conformance fixture of the Kafka adapter: kafka::partition_source over one partition of a
// topic on librdkafka's in-process mock cluster, with Kafka's committed offsets
// (kafka::partition_offset_store) as the position store, feeding a memory::table.
//
// Storage. One mock cluster lives for the whole test process (cluster() below); each fixture —
// the kit makes one per scenario — gets a topic of one partition and a consumer group of its
// own, both new: an empty log and no committed offset are what fresh storage is here. The
// records sit in the cluster, the committed offsets in its group coordinator; nothing of either
// is in this process, so a consumer destroyed and made again finds exactly what the cluster
// kept.
//
// The sink is a memory::table declared Replicated: the sink is not what is under test here (the
// memory parts have their own run), and Replicated is what rules R9a/R9c ask of a sink beside a
// Replicated store and source, so that AtLeastOnce (whose position Kafka keeps) is legal. Its
// capabilities are still checked by the kit — they are cheap, and it has no stand-in flag for a
// sink. Memory parts are their own storage: a crash leaves the table as it is.
//
// What the mock cannot express, so the fixture does not claim it:
//   * retention (truncate_before): librdkafka 2.0.2's mock has no DeleteRecords and no way to
//     set a partition's log start. Its only retention is a fixed cap (5 MiB or 100000 message
//     sets a partition) that deletes the oldest records when *more are appended*: it moves
//     end() and changes the log the kit reconciles against, and the kit's retention check
//     requires a log whose end stays put. Retention as position_lost is tested on the mock that
//     way in tests/kafka/manual_test.cpp ("retention: ...").
//   * Synced (append, power()): the source and the store declare Replicated — acknowledged by
//     the brokers, which replicate the topic and the offsets topic. The mock is one process
//     keeping everything in memory, with no fsync to cut; a power cut of this process says
//     nothing about a replicated cluster. The test runs without the Synced check, and the
//     report lists it as not run.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <commit_order/adapters/kafka.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/kit_event.hpp"

namespace conformance {

namespace co = commit_order;
namespace kf = commit_order::kafka;

/// The policy the Kafka source is built for. A Kafka source knows the pipeline's policy because
/// the policy decides who commits to Kafka (kafka/options.hpp): librdkafka's auto-commit timer
/// under AtMostOnce<AutoCommit>, the position store's synchronous commits under every other.
/// The kit drives one source type through every legal policy, so the fixture builds it for the
/// mode all but one of them have: explicit, synchronous commits. The kit's AtMostOnce<AutoCommit>
/// runs therefore move the position on the pipeline's (virtual) timer through synchronous
/// commits — the model the kit can check — not through librdkafka's wall-clock timer, which
/// commits asynchronously and is no position store whose commit is durable on return (its loss
/// is tested in tests/kafka/manual_test.cpp, "AtMostOnce<AutoCommit> on librdkafka's
/// auto-commit"). The library does not refuse a source built for another policy
/// (docs/adapters.md: "Policy is the pipeline's policy"), which is what lets the kit do this.
using kafka_source_policy = co::AtLeastOnce<co::EveryBatch>;
using kafka_partition_source = kf::partition_source<kit_event, kafka_source_policy>;

/// kafka::partition_source as the kit's source: every record, seek and error is the Kafka
/// source's own; a poll returns what a finite log returns — min(max, records left) — gathered
/// over as many polls of the Kafka source as that takes.
///
/// Why: a Kafka poll returns what has been fetched by then. It comes back empty when nothing
/// arrived within consumer_options::poll_wait (after a seek, or on a machine too loaded to
/// fetch in time), and short when the rest was not queued yet: measured on this mock, 8
/// records polled 2 at a time came as 1+2+2+2+1 in 6 runs of 300, as 2+2+2+2 in the others
/// (and librdkafka 2.0.2's mock answers a fetch with one message set, "FIXME: Multiple
/// messageSets ?" in its Fetch handler, so a log produced in several requests comes a request
/// per fetch). The kit needs neither: its pipelines run until a poll comes back empty
/// (pipeline::run(), the contract of a source over a finite log), so an early empty poll would
/// count the rest of the log as lost; and the crash matrix crashes each run at a fault point
/// its counting run enumerated, which the next run reaches only if its units are the same.
/// Batch boundaries are no part of what the kit checks of a source (the pipeline takes
/// whatever a poll returns), so making them those of a finite log hides nothing it could find.
class kafka_kit_source final {
 public:
  using record_type = kf::record<kit_event>;
  using event_type = kit_event;
  using capabilities = kafka_partition_source::capabilities;

  explicit kafka_kit_source(const kf::consumer_options& o) : kafka_(o, co::partition_id{0}) {}

  void seek(co::position p) {
    kafka_.seek(p);
    read_ = p;
  }

  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    batch_.clear();
    if (deferred_)
      std::rethrow_exception(std::exchange(deferred_, nullptr));
    // Far beyond any fetch on the mock: a Kafka source that holds back records for this long is
    // a failure the kit reports, not a wait.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (batch_.size() < max) {
      std::span<const record_type> got;
      try {
        got = kafka_.poll(max - batch_.size());
      } catch (...) {
        if (batch_.empty())
          throw;
        // As the Kafka source does itself: the records read before a failure are handed out
        // first, the failure comes with the next poll.
        deferred_ = std::current_exception();
        break;
      }
      if (!got.empty()) {
        batch_.insert(batch_.end(), got.begin(), got.end());
        read_ = co::position::after(got.back().source_offset);
        continue;
      }
      // Not sought yet: the source starts at its first retained record.
      const co::position at = read_.value_or(kafka_.earliest());
      const co::position end = fetched_end();
      if (at >= end)
        break;
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("the Kafka source returned nothing for 30 s at position " +
                                 std::to_string(at.value()) + ", below the end of the log " +
                                 std::to_string(end.value()));
    }
    return batch_;
  }

  [[nodiscard]] co::position earliest() const { return kafka_.earliest(); }
  [[nodiscard]] co::position end() const { return kafka_.end(); }

  /// The Kafka source itself (the offset store commits through its consumer).
  [[nodiscard]] kafka_partition_source& kafka() noexcept { return kafka_; }

 private:
  /// The end of the partition as the consumer's last fetch reported it (librdkafka keeps the
  /// high watermark of every fetch response), else asked of the cluster. Not end(): a
  /// ListOffsets request waits behind the consumer's long-polling fetch on the same connection
  /// (~10-20 ms on this mock, at every run's last poll). The log does not grow during a
  /// scenario, so the watermark of any fetch is its end.
  [[nodiscard]] co::position fetched_end() const {
    std::int64_t low = 0;
    std::int64_t high = -1;
    if (rd_kafka_get_watermark_offsets(kafka_.handle(), kafka_.topic().c_str(), 0, &low, &high) ==
            RD_KAFKA_RESP_ERR_NO_ERROR &&
        high >= 0)
      return co::position{high};
    return kafka_.end();
  }

  kafka_partition_source kafka_;
  std::optional<co::position> read_;
  std::vector<record_type> batch_;
  std::exception_ptr deferred_;
};

using kafka_kit_table = co::memory::table<
    kit_event, kit_key,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Replicated>>;

class kafka_fixture {
 public:
  using event_type = kit_event;
  using source_type = kafka_kit_source;
  using sink_type = kafka_kit_table;
  using store_type = kf::partition_offset_store;

  /// Fresh storage: a new topic of one partition, and a new group for its offsets.
  kafka_fixture() : name_(next_name()) { cluster().create_topic(name_, 1); }
  kafka_fixture(const kafka_fixture&) = delete;
  kafka_fixture& operator=(const kafka_fixture&) = delete;
  ~kafka_fixture() { close(); }

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }

  /// Produced to partition 0 and flushed: every record acknowledged by the cluster. The mock
  /// appends to a partition in the order the messages arrive, from offset 0 on a new topic:
  /// event i sits at offset i. Not read back here (two more round trips a scenario): the kit
  /// checks every record it reads against the event of its offset, and a log of the wrong
  /// length shows as a record never delivered or a row outside [0, n).
  void create_log(std::span<const kit_event> events) {
    kf::producer<kit_event> producer(cluster().client_config(), name_);
    for (const kit_event& e : events)
      producer.send(co::partition_id{0}, e);
    producer.flush();
  }

  source_type& source() {
    if (!source_)
      source_.emplace(options());
    return *source_;
  }
  sink_type& sink() { return table_; }
  /// Commits through the source's consumer (the coordinator checks the committer): opens the
  /// source if it is closed.
  store_type& store() {
    if (!store_)
      store_.emplace(source().kafka());
    return *store_;
  }

  /// The process's death, as far as the cluster can tell: the consumer goes, and what the
  /// cluster holds stays. The adapter's destructor closes the consumer (close():
  /// rd_kafka_consumer_close, then rd_kafka_destroy). For this source that sends nothing a
  /// SIGKILL would not: with enable.auto.commit=false (the library's setting for every policy
  /// but AtMostOnce<AutoCommit>) and enable.auto.offset.store=false librdkafka has no offset
  /// to commit on close, and a manually assigned consumer never joined the group, so it has
  /// none to leave. (A source built for AtMostOnce<AutoCommit> is different: its close commits
  /// the offset last handed to librdkafka, a final commit no killed process makes —
  /// kafka_conformance_test.cpp shows both.) The store goes first: it points into the source.
  void close() {
    store_.reset();
    source_.reset();
  }

  std::vector<co::testing::observed_row<kit_event>> rows() {
    std::vector<co::testing::observed_row<kit_event>> out;
    table_.for_each([&](const auto& r) { out.push_back({r.row.key, r.source_offset, r.row}); });
    return out;
  }

  [[nodiscard]] const std::string& topic() const noexcept { return name_; }

  /// The adversarial tier's owned properties: every name, prefix and scope under which
  /// librdkafka takes a setting the library decides (offset reset, auto-commit, the offset
  /// store, the isolation level), each with a value that contradicts the library's.
  static std::vector<std::pair<std::string, std::string>> owned_properties() {
    return {
        {"auto.offset.reset", "earliest"},        {"topic.auto.offset.reset", "earliest"},
        {"auto.offset.reset", "smallest"},        {"topic.auto.offset.reset", "latest"},
        {"topic.auto.offset.reset", "beginning"}, {"enable.auto.commit", "true"},
        {"topic.enable.auto.commit", "true"},     {"auto.commit.enable", "true"},
        {"topic.auto.commit.enable", "true"},     {"auto.commit.interval.ms", "100"},
        {"topic.auto.commit.interval.ms", "100"}, {"enable.auto.offset.store", "true"},
        {"offset.store.method", "file"},          {"topic.offset.store.method", "file"},
        {"isolation.level", "read_uncommitted"},  {"Auto.Offset.Reset", "earliest"},
    };
  }
  /// A property the library leaves to the user: the opener's control.
  static std::pair<std::string, std::string> accepted_property() {
    return {"client.id", "adversarial"};
  }
  /// Opens the fixture's source with one more property; throws when it is refused.
  void open_source_with(const std::string& name, const std::string& value) {
    kf::consumer_options o = options();
    o.config[name] = value;
    kafka_partition_source src(o, co::partition_id{0});
  }

  /// The cluster every fixture of this process uses: made at the first scenario, gone at exit
  /// (after every fixture, hence every client, is gone, as its destructor needs). On ephemeral
  /// loopback ports, so test processes running at once each have their own.
  static kf::mock_cluster& cluster() {
    static kf::mock_cluster c;
    return c;
  }

  /// A consumer of this fixture's topic in this fixture's group, with the mock's quick fetch
  /// timings. poll_wait is short: an empty poll costs that long, and kafka_kit_source polls
  /// again until the end of the log, so a short wait is never a lost record.
  [[nodiscard]] kf::consumer_options options() const {
    kf::consumer_options o{.topic = name_,
                           .config = cluster().consumer_config(),
                           .poll_wait = std::chrono::milliseconds(2)};
    o.config.emplace("group.id", name_);
    return o;
  }

 private:
  static std::string next_name() {
    static std::size_t made = 0;
    return "kit_" + std::to_string(made++);  // the cluster is this process's alone
  }

  std::string name_;
  sink_type table_;
  std::optional<source_type> source_;
  std::optional<store_type> store_;
};

}  // namespace conformance
