// SPDX-License-Identifier: BSL-1.0
// The conformance kit over the Kafka adapter: kafka::partition_source and Kafka's committed
// offsets (kafka::partition_offset_store) on librdkafka's in-process mock cluster, into a
// memory::table (kafka_fixture.hpp). Labels `kafka` and `integration`; the target is defined in
// tests/kafka/CMakeLists.txt beside the other Kafka tests. Not in the TSan leg (librdkafka's
// threads crash its runtime: CMakePresets.json).
//
// The crash matrix and the random schedules simulate crashes of the consumer's process: the
// fixture destroys the consumer, the cluster keeps its records and the group's committed
// offsets, and a new consumer of the same topic and group reopens them. Not checked here, and
// listed as not run in the report:
//   * Synced across power cuts: the source and the store declare Replicated, a promise of the
//     brokers' replication that an in-process mock with nothing on disk cannot be cut under;
//   * retention: the mock has no way to move a partition's log start without appending
//     (kafka_fixture.hpp), so the fixture has no truncate_before.
// And AtMostOnce<AutoCommit> runs over a source built for explicit commits (kafka_fixture.hpp
// says why); the second test case shows what destroying a source leaves in each mode.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <commit_order/testing/adversarial.hpp>
#include <commit_order/testing/conformance.hpp>

#include "conformance/kafka_fixture.hpp"
#include "conformance/report_check.hpp"

namespace co = commit_order;
namespace ct = commit_order::testing;
namespace kf = commit_order::kafka;
using conformance::kafka_fixture;

namespace {

/// Sized like the PostgreSQL run (8 records, batches 2 and 8, split 3): every scenario makes a
/// topic, produces its log and opens two or three consumers (each finds its coordinator before
/// its first committed-offset read), and the whole run must stay within ~90 s under ASan on a
/// loaded two-core machine. Batch 2 gives many multi-row units; batch 8 is one unit over 4
/// keys (keys repeat in it); split 3 cuts it into transactions of three rows. `schedules`: 10
/// per legal configuration (7 policies x 3 error handlings), the least at which the kit checks
/// that it reached every one.
ct::conformance_options options() {
  ct::conformance_options o;
  o.synced = false;  // Replicated: see above
  o.matrix_records = 8;
  o.matrix_batches = {2, 8};
  o.matrix_splits = {0, 3};
  o.schedule_count = 210;
  return ct::with_environment(o);
}

std::vector<conformance::kit_event> events(std::int64_t n) {
  std::vector<conformance::kit_event> out;
  for (std::int64_t i = 0; i < n; ++i)
    out.push_back(kafka_fixture::make_event(i % 4, i / 4));
  return out;
}

}  // namespace

TEST_CASE("conformance: Kafka partition source and Kafka's committed offsets (mock cluster)") {
  const auto r = ct::run_conformance<kafka_fixture>(
      "Kafka partition_source + Kafka committed offsets (mock cluster) into memory::table",
      options());
  conformance::expect_passed(r);
  conformance::expect_ran(r,
                          "position store: nothing before the first commit, each commit survives");
  conformance::expect_ran(r, "crash matrix AtMostOnce<EveryBatch>");
  conformance::expect_ran(r, "crash matrix AtMostOnce<EveryRecord>");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryBatch>");
  conformance::expect_ran(r, "crash matrix AtLeastOnce<EveryRecord>");
  conformance::expect_ran(r, "crash matrix TransactionalPosition<EveryBatch>");
  conformance::expect_ran(r, "random schedules", options().schedule_count);
  // What cannot be checked on the mock is listed as not run, with its reason: never a pass.
  for (const std::string n : {"Synced across power cuts: not selected in this run",
                              "retention: the fixture offers no truncate_before (no retention)"})
    CHECK_MESSAGE(std::find(r.not_run.begin(), r.not_run.end(), n) != r.not_run.end(),
                  r.adapter << ": the report does not list '" << n << "' as not run");
}

// The fixture's close() stands for the consumer's death. What destroying a Kafka source leaves
// in the cluster depends on the commit mode its policy gives it (librdkafka's close commits
// the offsets it was handed when enable.auto.commit is on): this is why the fixture's source is
// built for explicit commits, and the reason is checked, not assumed.
TEST_CASE(
    "conformance: destroying a Kafka source commits nothing unless it runs librdkafka's "
    "auto-commit") {
  kafka_fixture f;
  f.create_log(events(12));

  SUBCASE("explicit commits (the fixture's source): what was committed, nothing more") {
    auto& src = f.source();
    src.seek(co::position{0});
    REQUIRE(src.poll(5).size() == 5);
    f.close();
    CHECK(f.store().load() == std::nullopt);  // polled and destroyed: no commit of its own
    f.source().seek(co::position{0});
    REQUIRE(f.source().poll(5).size() == 5);
    f.store().commit(co::position{3});
    REQUIRE(f.source().poll(12).size() == 7);
    f.close();
    CHECK(f.store().load() == co::position{3});
  }

  SUBCASE("AtMostOnce<AutoCommit>: the close commits the offset librdkafka was handed") {
    using namespace std::chrono_literals;
    // The timer an hour away: only the close can commit.
    const co::settings s{.auto_commit_interval = 1h};
    {
      kf::partition_source<conformance::kit_event, co::AtMostOnce<co::AutoCommit>> src(
          f.options(), co::partition_id{0}, s);
      kf::partition_offset_store store(src);
      src.seek(co::position{0});
      // librdkafka stores offsets only for a partition it has been assigned: the first poll
      // assigns it (a Kafka poll returns what was fetched by then, maybe nothing yet).
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (src.poll(5).empty())
        REQUIRE(std::chrono::steady_clock::now() < deadline);
      store.commit(co::position{5});        // handed to librdkafka's offset store
      CHECK(store.load() == std::nullopt);  // not committed yet
    }
    // A killed process would have left nothing committed.
    CHECK(f.store().load() == co::position{5});
  }
}

TEST_CASE("adversarial: every spelling and scope of a setting the Kafka source owns is refused") {
  // Issue 21, item 1: topic.auto.offset.reset=earliest was accepted and won over the library's
  // "error", skipping retention's victims without position_lost.
  const auto r = ct::run_adversarial<kafka_fixture>("Kafka partition_source (mock cluster)");
  conformance::expect_passed(r);
  conformance::expect_ran(r, "owned properties: every spelling and scope is refused",
                          kafka_fixture::owned_properties().size());
}
