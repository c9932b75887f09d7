// SPDX-License-Identifier: BSL-1.0
// postgres::replicated against a real primary and a real streaming standby: refused while the
// server names no synchronous standby, accepted once one streams, and a unit's COMMIT returns
// only with its rows on the standby too. With it, AtLeastOnce may keep its position in a store
// as durable as Kafka's replicated offsets (rule R9a), which postgres::synced may not.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <type_traits>

#include <commit_order/adapters/memory.hpp>

#include "pg_orders.hpp"
#include "pg_support.hpp"
#include "support/lab/pg_server.hpp"

using namespace pg_test;
using namespace std::chrono_literals;

namespace {

using replicated_log = co::memory::log<order_event, co::Replicated>;
/// Stands for Kafka's committed offsets: a store as durable as a replicated topic.
using replicated_store = co::memory::position_store<co::Replicated>;

// The rule a team running Kafka into PostgreSQL meets: under AtLeastOnce the rows must be as
// durable as the offsets committed after them.
static_assert(std::is_same_v<co::durability_t<guarded<pg::replicated>>, co::Replicated>);
static_assert(std::is_same_v<co::verdict_t<replicated_log, guarded<pg::synced>, co::AtLeastOnce<>,
                                           co::with_store<replicated_store>>,
                             co::rules::sink_less_durable_than_store>);
static_assert(co::is_legal_v<replicated_log, guarded<pg::replicated>, co::AtLeastOnce<>,
                             co::with_store<replicated_store>>);

/// Polls `sql` (a count) on `c` until it is `want`, for up to 30 s; the last count.
std::int64_t wait_for_count(client& c, const std::string& sql, std::int64_t want) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::int64_t n = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    n = c.integer(sql).value_or(-1);
    if (n == want)
      break;
    std::this_thread::sleep_for(50ms);
  }
  return n;
}

}  // namespace

TEST_CASE("replicated is refused without a synchronous standby, and accepted once one streams") {
  crash_lab::pg_server primary(crash_lab::pg_server_options{.fsync = true});
  const std::string schema = fresh_schema(primary.conninfo(), "t_replicated");

  // No standby is named: the type would claim what the server does not give.
  bool refused = false;
  try {
    guarded<pg::replicated> sink(primary.conninfo(), in_schema(schema));
  } catch (const pg::durability_mismatch& e) {
    refused = true;
    CHECK(e.actual().fsync == "on");
    CHECK(e.actual().synchronous_standby_names.empty());
    CHECK(std::string(e.what()).find("synchronous_standby_names") != std::string::npos);
  }
  CHECK(refused);
  CHECK_NOTHROW(guarded<pg::synced>(primary.conninfo(), in_schema(schema)));

  // A standby streams, and the primary waits for it at every COMMIT.
  crash_lab::pg_server standby = primary.make_standby();
  client admin(primary.conninfo());
  admin.exec("ALTER SYSTEM SET synchronous_standby_names = '*'");
  admin.exec("SELECT pg_reload_conf()");
  REQUIRE(wait_for_count(
              admin, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", 1) == 1);

  guarded<pg::replicated> sink(primary.conninfo(), in_schema(schema));
  CHECK(sink.database().durability().synchronous_standby_names == "*");
  replicated_log log;
  for (std::int64_t i = 0; i < 200; ++i)
    log.append(order_event{i % 40, 100 + i % 40, 1000 + i, i});
  replicated_store positions;
  co::pipeline<replicated_log, guarded<pg::replicated>, co::AtLeastOnce<>,
               co::with_store<replicated_store>>
      p(log, sink, positions, co::settings{.batch_size = 50});
  CHECK(p.run() == 200);
  CHECK(positions.load() == co::position{200});

  // Every COMMIT returned after the standby flushed it; a hot standby shows the rows once it
  // has replayed them, each order at its latest event.
  client on_standby(standby.conninfo(), schema);
  CHECK(wait_for_count(on_standby, "SELECT count(*) FROM orders_flat WHERE event_seq >= 160", 40) ==
        40);
  CHECK(on_standby.count("orders_flat") == 40);
}

TEST_CASE(
    "replicated refuses a standby name no standby streams under, and a COMMIT whose wait "
    "for the standby was cancelled") {
  crash_lab::pg_server primary(crash_lab::pg_server_options{.fsync = true});
  const std::string schema = fresh_schema(primary.conninfo(), "t_replicated_cancel");
  client admin(primary.conninfo());

  // A name no standby has (a typo): every COMMIT would wait, and a cancelled wait would
  // acknowledge it anyway. Refused when the sink connects.
  admin.exec("ALTER SYSTEM SET synchronous_standby_names = 'no_such_standby'");
  admin.exec("SELECT pg_reload_conf()");
  bool refused = false;
  try {
    guarded<pg::replicated> sink(primary.conninfo(), in_schema(schema));
  } catch (const pg::durability_mismatch& e) {
    refused = true;
    CHECK(e.actual().synchronous_standby_names == "no_such_standby");
    CHECK(e.actual().synchronous_standbys == 0);
  }
  CHECK(refused);

  // A standby in sync when the sink connects, gone when a unit commits: the COMMIT waits; an
  // operator cancels the wait; the server acknowledges the COMMIT with a warning. That unit's
  // outcome is in doubt, and no position is committed after it.
  crash_lab::pg_server standby = primary.make_standby();
  admin.exec("ALTER SYSTEM SET synchronous_standby_names = '*'");
  admin.exec("SELECT pg_reload_conf()");
  REQUIRE(wait_for_count(
              admin, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", 1) == 1);
  guarded<pg::replicated> sink(primary.conninfo(), in_schema(schema));
  standby.crash();
  replicated_log log;
  for (std::int64_t i = 0; i < 100; ++i)
    log.append(order_event{i % 40, 100 + i % 40, 1000 + i, i});
  replicated_store positions;
  std::atomic<bool> done{false};
  std::string error;
  std::thread consumer([&] {
    try {
      co::pipeline<replicated_log, guarded<pg::replicated>, co::AtLeastOnce<>,
                   co::with_store<replicated_store>>
          p(log, sink, positions, co::settings{.batch_size = 50});
      (void)p.run();
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  });
  int cancelled = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
    cancelled += static_cast<int>(
        admin
            .integer("SELECT count(*) FROM (SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                     "WHERE wait_event = 'SyncRep') c")
            .value_or(0));
  }
  REQUIRE_MESSAGE(done, "the consumer still waits for its standby");
  consumer.join();
  CHECK(cancelled >= 1);
  CHECK(error.find("wait for its synchronous standby was cancelled") != std::string::npos);
  CHECK_FALSE(positions.load().has_value());  // no position after a unit that is in doubt
}
