// SPDX-License-Identifier: BSL-1.0
// The PostgreSQL sink's transaction, against a real server: reading progress sends nothing
// (watched at the connection, with libpq's protocol trace) and reports what is durable; and a
// COMMIT whose answer is lost -- the connection cut by a proxy after COMMIT was sent, before
// and after the server ran it -- is `commit_in_doubt`, never `connection_lost`, and the
// recovery that follows resumes from the stored position with nothing lost and nothing
// applied twice.
#include <doctest/doctest.h>

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <commit_order/adapters/memory.hpp>

#include "commit_cut_proxy.hpp"
#include "pg_orders.hpp"
#include "pg_support.hpp"

using namespace pg_test;

namespace {

const co::partition_id p0{0};

using order_log = co::memory::log<order_event, co::Buffered>;

/// Events of orders 0..n-1, one each, at offsets 0..n-1.
order_log orders(std::int64_t n) {
  order_log log;
  for (std::int64_t i = 0; i < n; ++i)
    log.append(order_event{i, 100 + i, 1000 + i, 1});
  return log;
}

/// Everything the client sends on one connection and receives on it, as libpq's protocol
/// trace writes it: a message that goes out or comes in makes it grow.
class protocol_trace final {
 public:
  explicit protocol_trace(PGconn* conn) : conn_(conn), file_(std::tmpfile()) {
    REQUIRE(file_ != nullptr);
    PQtrace(conn_, file_);
  }
  protocol_trace(const protocol_trace&) = delete;
  protocol_trace& operator=(const protocol_trace&) = delete;
  ~protocol_trace() {
    PQuntrace(conn_);
    std::fclose(file_);
  }
  /// Bytes of trace so far.
  [[nodiscard]] long size() const {
    std::fflush(file_);
    return std::ftell(file_);
  }

 private:
  PGconn* conn_;
  std::FILE* file_;
};

/// A sink that calls `on_apply` before each row, while the pipeline's unit is open.
template <class Sink>
struct peeking final : Sink {
  using Sink::Sink;
  std::function<void()> on_apply;
  void apply(co::partition_id k, co::offset o, const order_event& row) {
    if (on_apply)
      on_apply();
    Sink::apply(k, o, row);
  }
  void apply(co::offset o, const order_event& row) { apply(co::partition_id{0}, o, row); }
};

/// An audit of orders_flat: one row per row the table took (inserted or changed), with the
/// offset it came from, in the same transaction -- a record applied twice shows twice, a unit
/// rolled back not at all.
void audit(const std::string& schema) {
  client c(conninfo(), schema);
  c.exec("CREATE TABLE applied (source_offset BIGINT NOT NULL)");
  c.exec(
      "CREATE FUNCTION note_applied() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO "
      "applied VALUES (NEW.source_offset); RETURN NULL; END $$");
  c.exec(
      "CREATE TRIGGER note_applied AFTER INSERT OR UPDATE ON orders_flat FOR EACH ROW EXECUTE "
      "FUNCTION note_applied()");
}

}  // namespace

// ---- progress ------------------------------------------------------------------------------

TEST_CASE("reading progress sends nothing, and says what is durable while a unit is open") {
  const std::string schema = fresh_schema(conninfo(), "t_tx_progress");
  order_log log = orders(20);
  using sink_t = peeking<guarded<>>;
  sink_t sink(conninfo(), in_schema(schema));
  co::pipeline<order_log, sink_t, co::TransactionalPosition<>> p(log, sink,
                                                                 co::settings{.batch_size = 10});
  CHECK(p.poll_once() == 10);  // recovery and the first unit: offsets 0..9 committed
  const protocol_trace trace(sink.database().get());

  // Inside the second unit, with its rows applied to the sink and not committed.
  std::vector<co::progress> seen;
  std::vector<long> traced;
  sink.on_apply = [&] {
    seen.push_back(p.progress(p0));
    traced.push_back(trace.size());
  };
  const long before = trace.size();
  const std::uint64_t round_trips = sink.stats().round_trips;
  CHECK(p.poll_once() == 10);
  REQUIRE(seen.size() == 10);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    INFO("at the row of offset " << 10 + i);
    CHECK(traced[i] == before);                         // not a byte sent or received
    CHECK(seen[i].applied_watermark == co::offset{9});  // the last commit, not the open unit
    CHECK(seen[i].committed == co::position{10});
  }
  // The unit itself went through the traced connection: the check above could see a query.
  CHECK(trace.size() > before);
  CHECK(sink.stats().round_trips == round_trips + 2);  // the unit's two, no more

  // Between units, too.
  sink.on_apply = nullptr;
  const long after_unit = trace.size();
  const co::progress now = p.progress(p0);
  CHECK(trace.size() == after_unit);
  CHECK(now.applied_watermark == co::offset{19});
  CHECK(now.committed == co::position{20});
  CHECK(now.unapplied() == 0);
}

TEST_CASE("the applied watermark is read with a claim and raised by a commit, never sent for") {
  const std::string schema = fresh_schema(conninfo(), "t_tx_watermark");
  {
    guarded<> first(conninfo(), in_schema(schema));
    first.begin();
    first.claim(p0, co::epoch{1});
    for (std::int64_t i = 0; i < 5; ++i)
      first.apply(p0, co::offset{i}, order_event{i, 1, 1, 1});
    first.store_position(p0, co::position{5});
    first.commit();
    CHECK(first.applied_watermark(p0) == co::offset{4});
  }
  guarded<> sink(conninfo(), in_schema(schema));
  CHECK(sink.applied_watermark(p0) == std::nullopt);  // nothing read or committed yet
  sink.begin();
  CHECK(sink.claim(p0, co::epoch{2}) == co::position{5});
  CHECK(sink.applied_watermark(p0) == co::offset{4});  // the other consumer's rows, read
  for (std::int64_t i = 5; i < 8; ++i)
    sink.apply(p0, co::offset{i}, order_event{i, 1, 1, 1});
  sink.store_position(p0, co::position{8});
  // A read inside the transaction sends what it buffered (the rows are on the server now,
  // uncommitted) and does not take them for the watermark.
  CHECK(sink.load_position(p0) == co::position{8});
  CHECK(sink.applied_watermark(p0) == co::offset{4});
  sink.rollback();
  CHECK(sink.applied_watermark(p0) == co::offset{4});  // rolled back: nothing was applied
  sink.begin();
  sink.claim(p0, co::epoch{2});
  for (std::int64_t i = 5; i < 8; ++i)
    sink.apply(p0, co::offset{i}, order_event{i, 1, 1, 1});
  sink.store_position(p0, co::position{8});
  sink.commit();
  CHECK(sink.applied_watermark(p0) == co::offset{7});
  // The version guard: a row it keeps out is not in the table, and raises nothing.
  versioned<> by_version(conninfo(), in_schema(schema, "by_version"));
  by_version.begin();
  by_version.apply(p0, co::offset{100}, order_event{1, 1, 1, 0});  // event_seq 0 < 1: kept out
  by_version.commit();
  CHECK(by_version.applied_watermark(p0) == std::nullopt);
  CHECK(by_version.load_position(p0) == std::nullopt);  // a read: the table's watermark is 7
  CHECK(by_version.applied_watermark(p0) == co::offset{7});
}

// ---- a COMMIT whose answer is lost ---------------------------------------------------------

namespace {

struct in_doubt_run {
  std::int64_t stored_after_cut = 0;  ///< the position the server holds right after the cut
  std::uint64_t rows_sent_on_recovery = 0;
  std::uint64_t absorbed_on_recovery = 0;
  std::size_t records_on_recovery = 0;
};

// Twenty records through a pipeline whose connection goes through the proxy, ten per unit;
// the second unit's COMMIT is cut at `where`. Checks the error, then recovers.
in_doubt_run cut_second_commit(const std::string& schema, commit_cut_proxy::cut where) {
  commit_cut_proxy proxy(conninfo());
  order_log log = orders(20);
  guarded<> sink(proxy.conninfo(), in_schema(schema));
  audit(schema);
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(log, sink,
                                                                    co::settings{.batch_size = 10});
  REQUIRE(p.poll_once() == 10);
  REQUIRE(proxy.cuts() == 0);
  proxy.arm(where);
  try {
    p.poll_once();
    FAIL("the unit whose COMMIT answer was lost must fail");
  } catch (const pg::commit_in_doubt& e) {
    INFO(e.what());
    CHECK(e.sqlstate().starts_with("08"));
    const std::vector<pg::commit_in_doubt::stored> stored(e.positions().begin(),
                                                          e.positions().end());
    CHECK(stored == std::vector<pg::commit_in_doubt::stored>{{p0, co::position{20}}});
  } catch (const pg::connection_lost& e) {
    FAIL("a COMMIT whose answer was lost is in doubt, not a connection lost before it: "
         << std::string(e.what()));
  }
  CHECK(proxy.cuts() == 1);  // the connection was cut at the COMMIT, and only there
  in_doubt_run run;
  client c(conninfo(), schema);
  run.stored_after_cut =
      c.integer("SELECT position FROM commit_order_positions WHERE stream = 'orders'").value_or(-1);

  // Recovery reads the stored position (a claim, on a new connection) and resumes there.
  const pg::sink_stats before = sink.stats();
  run.records_on_recovery = p.run();
  run.rows_sent_on_recovery = sink.stats().rows_sent - before.rows_sent;
  run.absorbed_on_recovery = sink.stats().rows_absorbed - before.rows_absorbed;
  CHECK(sink.database().connects() == 2);
  CHECK(sink.load_position(p0) == co::position{20});
  CHECK(p.progress(p0).committed == co::position{20});
  // Nothing lost, nothing applied twice: every record's row, each taken once by the table.
  CHECK(c.count("orders_flat") == 20);
  CHECK(c.count("orders_flat WHERE source_offset = order_id AND total_cents = 1000 + order_id") ==
        20);
  CHECK(c.count("applied") == 20);
  CHECK(c.integer("SELECT count(DISTINCT source_offset) FROM applied") == 20);
  return run;
}

}  // namespace

TEST_CASE(
    "a COMMIT answer lost after the server committed is in doubt, and recovery goes on after it") {
  const std::string schema = fresh_schema(conninfo(), "t_tx_doubt_landed");
  const in_doubt_run run = cut_second_commit(schema, commit_cut_proxy::cut::after_server);
  CHECK(run.stored_after_cut == 20);    // the unit committed
  CHECK(run.records_on_recovery == 0);  // nothing read again
  CHECK(run.rows_sent_on_recovery == 0);
  CHECK(run.absorbed_on_recovery == 0);
}

TEST_CASE("a COMMIT lost before the server ran it is in doubt, and recovery redoes the unit once") {
  const std::string schema = fresh_schema(conninfo(), "t_tx_doubt_lost");
  const in_doubt_run run = cut_second_commit(schema, commit_cut_proxy::cut::before_server);
  CHECK(run.stored_after_cut == 10);     // the unit did not commit
  CHECK(run.records_on_recovery == 10);  // read again from its first record
  CHECK(run.rows_sent_on_recovery == 10);
  CHECK(run.absorbed_on_recovery == 0);  // none of its rows was there to absorb
}

TEST_CASE("a session ended while COMMIT runs is in doubt, not a lost connection") {
  // The server ends the session (pg_terminate_backend: 57P01) while a deferred constraint
  // trigger holds the COMMIT at the server; the answer is the session's end, not COMMIT's.
  const std::string schema = fresh_schema(conninfo(), "t_tx_doubt_terminated");
  guarded<> sink(conninfo(), in_schema(schema));
  sink.begin();
  sink.claim(p0, co::epoch{1});
  sink.commit();
  client admin(conninfo(), schema);
  admin.exec(
      "CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM "
      "pg_sleep(60); RETURN NULL; END $$");
  admin.exec(
      "CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT ON orders_flat DEFERRABLE INITIALLY "
      "DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_commit()");
  const int backend = PQbackendPID(sink.database().get());
  std::jthread terminator([&] {
    client watcher(conninfo());
    const std::string holding =
        "SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(backend) +
        " AND wait_event = 'PgSleep' AND query = 'COMMIT'";
    for (int i = 0; i < 6000 && watcher.integer(holding) != 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    watcher.exec("SELECT pg_terminate_backend(" + std::to_string(backend) + ")");
  });
  sink.begin();
  sink.apply(p0, co::offset{0}, order_event{1, 1, 1, 1});
  sink.store_position(p0, co::position{1});
  try {
    sink.commit();
    FAIL("a COMMIT whose session was ended must fail");
  } catch (const pg::commit_in_doubt& e) {
    INFO(e.what());
    CHECK(e.sqlstate() == "57P01");
  } catch (const pg::connection_lost& e) {
    FAIL("a COMMIT whose answer was lost is in doubt: " << std::string(e.what()));
  }
  terminator.join();
  // Nothing more goes into the transaction in doubt; rollback() ends it, and the stored
  // position, read on a new connection, resolves it: the trigger had not returned, so no.
  CHECK_THROWS_AS(sink.apply(p0, co::offset{1}, order_event{2, 1, 1, 1}), std::logic_error);
  sink.rollback();
  admin.exec("DROP TRIGGER hold_commit ON orders_flat");
  CHECK(sink.load_position(p0) == std::nullopt);
  CHECK(sink.database().connects() == 2);
  CHECK(admin.count("orders_flat") == 0);
}

// ---- audit: retry_world after a COMMIT in doubt ---------------------------------------------

TEST_CASE("AtMostOnce with retry_world never applies an in-doubt unit twice") {
  // AtMostOnce over the append sink (Transactional, not Idempotent: R16 lets retry_world
  // through because "a unit in a transaction is rolled back and re-run, always safe"). The
  // second unit's COMMIT lands on the server and its answer is lost: commit_in_doubt, an
  // infrastructure_error, which retry_world takes for one that rolled back, and re-runs the
  // unit. At most once: each record's row is in the table once at most.
  const std::string schema = fresh_schema(conninfo(), "t_tx_doubt_retry_world");
  commit_cut_proxy proxy(conninfo());
  order_log log = orders(20);
  pg::store_options so;
  so.schema = schema;
  so.stream = "orders";
  pg::position_store<pg::buffered> store(conninfo(), so);
  appending<> sink(proxy.conninfo(), in_schema(schema));
  co::pipeline<order_log, appending<>, co::AtMostOnce<>,
               co::with_store<pg::position_store<pg::buffered>>,
               co::with_error_handling<co::retry_world<2>>>
      p(log, sink, store,
        co::settings{.batch_size = 10,
                     .world_backoff =
                         co::backoff{std::chrono::milliseconds{1}, std::chrono::milliseconds{1}}});
  REQUIRE(p.poll_once() == 10);
  proxy.arm(commit_cut_proxy::cut::after_server);
  try {
    p.poll_once();
  } catch (const std::exception& e) {
    MESSAGE("the second unit failed: " << e.what());
  }
  CHECK(proxy.cuts() == 1);
  client c(conninfo(), schema);
  CHECK(c.count("orders_log") == 20);
  CHECK(c.integer("SELECT count(*) - count(DISTINCT source_offset) FROM orders_log").value_or(-1) ==
        0);
}
