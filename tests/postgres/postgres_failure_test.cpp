// SPDX-License-Identifier: BSL-1.0
// What the PostgreSQL sinks make of failures, against a real server: a row refused for its
// values is its record's (found even though the unit went out as one statement, and even when
// the constraint is checked only at COMMIT); serialization failures and deadlocks are retried
// with the whole unit; a full disk, a shutting-down server or a lost connection are the world's
// (never dead-lettered, the position unmoved, the unit redone).
#include <doctest/doctest.h>

#include <sys/socket.h>

#include <initializer_list>
#include <string>
#include <thread>

#include "pg_orders.hpp"
#include "pg_support.hpp"

using namespace pg_test;

namespace {

const co::partition_id p0{0};

order_event ev(std::int64_t id, std::int64_t total) {
  return order_event{id, 100 + id, total, 1};
}

using order_log = co::memory::log<order_event, co::Buffered>;

order_log ten_orders() {
  order_log log;
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(ev(i, i == 7 ? -1 : 1000 + i));  // order 7's total breaks the CHECK below
  return log;
}

// A constraint the row of order 7 violates.
void add_check(const std::string& schema) {
  client(conninfo(), schema)
      .exec("ALTER TABLE orders_flat ADD CONSTRAINT total_not_negative CHECK (total_cents >= 0)");
}

// A statement trigger on orders_flat that raises `sqlstate` the first `times` times (a
// sequence counts: it is not rolled back with the failed transactions).
void inject(const std::string& schema, const std::string& sqlstate, int times) {
  client c(conninfo(), schema);
  c.exec("CREATE SEQUENCE injected_failures");
  c.exec(
      "CREATE FUNCTION inject_failure() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF "
      "nextval('injected_failures') <= " +
      std::to_string(times) + " THEN RAISE EXCEPTION 'injected failure' USING ERRCODE = '" +
      sqlstate + "'; END IF; RETURN NULL; END $$");
  c.exec(
      "CREATE TRIGGER inject_failure BEFORE INSERT ON orders_flat FOR EACH STATEMENT "
      "EXECUTE FUNCTION inject_failure()");
}

}  // namespace

// ---- a record's failure ------------------------------------------------------------------

TEST_CASE("a PostgreSQL error says whose fault it is, and agrees with its type") {
  // blame() is world exactly for an infrastructure_error, the only thing the loop looks at:
  // for record, world and retryable SQLSTATEs, and for the errors the connection builds itself.
  for (const std::string_view code : {"23505", "23514", "22001", "22P02", "40001", "40P01", "53100",
                                      "57P01", "42P01", "55P03", ""}) {
    try {
      pg::detail::raise(code, "the statement");
    } catch (const co::adapters::classified_failure& f) {
      const auto* e = dynamic_cast<const co::error*>(&f);
      REQUIRE(e != nullptr);
      const bool world = dynamic_cast<const co::infrastructure_error*>(e) != nullptr;
      CHECK(world == (f.blame() == co::adapters::fault::world));
      CHECK(world == !pg::is_record_failure(code));
      CHECK(std::string_view(e->what()).starts_with("commit_order::postgres: the statement"));
      CHECK(dynamic_cast<const pg::sqlstate_code&>(f).sqlstate() == code);
    }
  }
  CHECK(pg::connection_lost("08006", "gone").blame() == co::adapters::fault::world);
  CHECK(pg::unit_refused("23503", "refused together").blame() == co::adapters::fault::world);
  CHECK(pg::commit_in_doubt("08006", "no answer", {}).blame() == co::adapters::fault::world);
  static_assert(std::is_base_of_v<co::adapters::classified_failure, pg::record_error>);
  static_assert(std::is_base_of_v<co::adapters::classified_failure, pg::serialization_failure>);
}

TEST_CASE("a row refused by a CHECK is found and named, though its unit went as one statement") {
  const std::string schema = fresh_schema(conninfo(), "t_check");
  guarded<> sink(conninfo(), in_schema(schema));
  add_check(schema);
  sink.begin();
  for (std::int64_t i = 0; i < 10; ++i)
    sink.apply(p0, co::offset{i}, ev(i, i == 7 ? -1 : 1000 + i));
  sink.store_position(p0, co::position{10});
  try {
    sink.commit();
    FAIL("the refused row must surface");
  } catch (const co::row_failed& e) {
    CHECK(e.at() == co::offset{7});
    CHECK(e.partition() == p0);
    try {
      std::rethrow_if_nested(e);
      FAIL("the record's error is nested");
    } catch (const pg::record_error& r) {
      CHECK(r.sqlstate() == "23514");
      CHECK(std::string(r.what()).find("order_id=7") != std::string::npos);
    }
  }
  sink.rollback();
  CHECK(sink.stats().diagnoses == 1);
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 0);
  CHECK_FALSE(sink.load_position(p0).has_value());

  // Outside a transaction the row is its own transaction, and the call is the record's.
  try {
    sink.apply(p0, co::offset{7}, ev(7, -1));
    FAIL("the refused row must surface");
  } catch (const pg::record_error& r) {
    CHECK(r.sqlstate() == "23514");
  }
  CHECK_NOTHROW(sink.apply(p0, co::offset{8}, ev(8, 5)));
}

TEST_CASE("the pipeline dead-letters the refused record and commits the rest of its unit") {
  const std::string schema = fresh_schema(conninfo(), "t_check_pipeline");
  guarded<> sink(conninfo(), in_schema(schema));
  add_check(schema);
  order_log log = ten_orders();
  using letters = co::memory::dead_letters<order_event, co::Buffered>;
  letters dl;
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
      p(log, sink, dl, co::settings{.batch_size = 10});
  CHECK(p.run() == 10);
  REQUIRE(dl.letters().size() == 1);
  CHECK(dl.letters()[0].source_offset == co::offset{7});
  CHECK(std::string(dl.letters()[0].reason).find("total_not_negative") != std::string::npos);
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 9);
  CHECK(c.count("orders_flat WHERE order_id = 7") == 0);
  CHECK(sink.load_position(p0) == co::position{10});
}

TEST_CASE("under stop, the refused record stops the pipeline with record_failed naming it") {
  const std::string schema = fresh_schema(conninfo(), "t_check_stop");
  guarded<> sink(conninfo(), in_schema(schema));
  add_check(schema);
  order_log log = ten_orders();
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>> p(log, sink,
                                                                    co::settings{.batch_size = 10});
  try {
    p.poll_once();
    FAIL("the refused record must stop the pipeline");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{7});
    CHECK(e.committed() == co::position{0});
  }
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 0);
}

TEST_CASE("a deferred constraint refused at COMMIT is still found and named") {
  const std::string schema = fresh_schema(conninfo(), "t_deferred");
  guarded<> sink(conninfo(), in_schema(schema));
  client c(conninfo(), schema);
  c.exec("CREATE TABLE customers (id BIGINT PRIMARY KEY)");
  c.exec("INSERT INTO customers SELECT generate_series(100, 200)");
  c.exec(
      "ALTER TABLE orders_flat ADD CONSTRAINT known_customer FOREIGN KEY (customer_id) "
      "REFERENCES customers (id) DEFERRABLE INITIALLY DEFERRED");
  sink.begin();
  for (std::int64_t i = 0; i < 10; ++i)
    sink.apply(p0, co::offset{i}, order_event{i, i == 4 ? 999 : 100 + i, 1, 1});
  sink.store_position(p0, co::position{10});
  try {
    sink.commit();
    FAIL("the refused row must surface");
  } catch (const co::row_failed& e) {
    CHECK(e.at() == co::offset{4});
    CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e), doctest::Contains("known_customer"),
                         pg::record_error);
  }
  sink.rollback();
  CHECK(c.count("orders_flat") == 0);
}

// ---- constraints between the rows of one unit: what applying them in offset order gives ----

namespace {

using letters = co::memory::dead_letters<order_event, co::Buffered>;

// A pipeline that dead-letters what it may blame, over a log of `events` in one unit.
struct dead_lettering_run {
  order_log log;
  letters dl;
  guarded<> sink;
  dead_lettering_run(const std::string& schema, std::size_t rows_per_statement,
                     std::initializer_list<order_event> events)
      : sink(conninfo(), [&] {
        pg::sink_options o = in_schema(schema);
        o.rows_per_statement = rows_per_statement;
        return o;
      }()) {
    for (const order_event& e : events)
      log.append(e);
  }
  std::size_t run() {
    co::pipeline<order_log, guarded<>, co::TransactionalPosition<>,
                 co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
        p(log, sink, dl, co::settings{.batch_size = 100});
    return p.run();
  }
};

// orders_flat.customer_id names another order of the same table (a parent), checked as given.
void self_reference(const std::string& schema, const std::string& timing) {
  client(conninfo(), schema)
      .exec(
          "ALTER TABLE orders_flat ADD CONSTRAINT parent_order FOREIGN KEY (customer_id) "
          "REFERENCES orders_flat (order_id) " +
          timing);
}

}  // namespace

TEST_CASE("a unique non-key column given up and taken in one unit holds, as in offset order") {
  // Order 2 gives up customer 500, then order 1 takes it. Sent in key order, order 1 would
  // take 500 while order 2 still held it.
  const std::string schema = fresh_schema(conninfo(), "t_unique_order");
  guarded<> sink(conninfo(), in_schema(schema));
  client c(conninfo(), schema);
  c.exec("ALTER TABLE orders_flat ADD CONSTRAINT one_order_per_customer UNIQUE (customer_id)");
  sink.begin();
  sink.apply(p0, co::offset{0}, order_event{2, 500, 1, 1});
  sink.store_position(p0, co::position{1});
  sink.commit();
  sink.begin();
  sink.apply(p0, co::offset{1}, order_event{2, 600, 1, 2});
  sink.apply(p0, co::offset{2}, order_event{1, 500, 1, 1});
  sink.store_position(p0, co::position{3});
  CHECK_NOTHROW(sink.commit());
  CHECK(c.integer("SELECT customer_id FROM orders_flat WHERE order_id = 1") == 500);
  CHECK(c.integer("SELECT customer_id FROM orders_flat WHERE order_id = 2") == 600);
  CHECK(sink.load_position(p0) == co::position{3});
  CHECK(sink.stats().diagnoses == 0);
}

TEST_CASE("a parent and its children in one unit hold across rows_per_statement chunks") {
  // Parent order 50 first, then its children 1..3: in key order the children's chunk would go
  // before their parent's.
  const std::string schema = fresh_schema(conninfo(), "t_parent_chunks");
  dead_lettering_run r(schema, 2,
                       {order_event{50, 50, 1, 1}, order_event{1, 50, 1, 1},
                        order_event{2, 50, 1, 1}, order_event{3, 50, 1, 1}});
  self_reference(schema, "");
  CHECK(r.run() == 4);
  CHECK(r.dl.letters().empty());
  CHECK(client(conninfo(), schema).count("orders_flat") == 4);
  CHECK(r.sink.load_position(p0) == co::position{4});
  CHECK(r.sink.stats().diagnoses == 0);
}

TEST_CASE("only the record that fails in offset order is dead-lettered, whatever the chunks") {
  // Order 3 names a parent that does not exist. Its chunk holds order 2, a healthy child whose
  // parent (order 50) went in the chunk before: it must not be blamed.
  const std::string schema = fresh_schema(conninfo(), "t_blame_chunks");
  dead_lettering_run r(schema, 2,
                       {order_event{50, 50, 1, 1}, order_event{1, 50, 1, 1},
                        order_event{2, 50, 1, 1}, order_event{3, 999, 1, 1}});
  self_reference(schema, "");
  CHECK(r.run() == 4);
  REQUIRE(r.dl.letters().size() == 1);
  CHECK(r.dl.letters()[0].source_offset == co::offset{3});
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 3);
  CHECK(c.count("orders_flat WHERE order_id = 3") == 0);
  CHECK(r.sink.load_position(p0) == co::position{4});
}

TEST_CASE("a deferred pair is never blamed for an entry whose counterpart is missing") {
  // Double entry: orders 1 and 2 name each other (checked at COMMIT); order 3 names order 99,
  // which never comes. Only order 3 fails when the unit is applied in offset order.
  const std::string schema = fresh_schema(conninfo(), "t_blame_pairs");
  dead_lettering_run r(
      schema, 10000, {order_event{1, 2, 1, 1}, order_event{2, 1, 1, 1}, order_event{3, 99, 1, 1}});
  self_reference(schema, "DEFERRABLE INITIALLY DEFERRED");
  CHECK(r.run() == 3);
  REQUIRE(r.dl.letters().size() == 1);
  CHECK(r.dl.letters()[0].source_offset == co::offset{2});
  CHECK(std::string(r.dl.letters()[0].reason).find("parent_order") != std::string::npos);
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat WHERE order_id IN (1, 2)") == 2);
  CHECK(c.count("orders_flat WHERE order_id = 3") == 0);
  CHECK(r.sink.load_position(p0) == co::position{3});
}

TEST_CASE("a unit no single record of which is to blame is refused whole, nothing dead-lettered") {
  // Orders 1 and 2 each name an order that never comes: the unit fails without either of them
  // too, so neither is the one. The unit is the world's to mend: typed, the position unmoved.
  const std::string schema = fresh_schema(conninfo(), "t_blame_none");
  dead_lettering_run r(schema, 10000, {order_event{1, 98, 1, 1}, order_event{2, 99, 1, 1}});
  self_reference(schema, "DEFERRABLE INITIALLY DEFERRED");
  CHECK_THROWS_WITH_AS(r.run(), doctest::Contains("no record is to blame"), pg::unit_refused);
  CHECK(r.dl.letters().empty());
  CHECK(client(conninfo(), schema).count("orders_flat") == 0);
  CHECK_FALSE(r.sink.load_position(p0).has_value());
}

// ---- serialization failures and deadlocks ----------------------------------------------------

TEST_CASE("serialization failures and deadlocks are retried with the whole unit") {
  const std::string schema = fresh_schema(conninfo(), "t_retry");
  pg::sink_options o = in_schema(schema);
  o.serialization_retries = 3;
  guarded<> sink(conninfo(), o);
  std::string code;
  SUBCASE("40001") {
    code = "40001";
  }
  SUBCASE("40P01") {
    code = "40P01";
  }
  inject(schema, code, 2);
  sink.begin();
  sink.claim(p0, co::epoch{1});
  sink.commit();
  sink.begin();
  for (std::int64_t i = 0; i < 10; ++i)
    sink.apply(p0, co::offset{i}, ev(i, 1));
  sink.store_position(p0, co::position{10});
  sink.commit();
  CHECK(sink.stats().retries == 2);
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 10);
  CHECK(sink.load_position(p0) == co::position{10});
}

TEST_CASE("a serialization failure that outlasts the retries holds the position back") {
  const std::string schema = fresh_schema(conninfo(), "t_retry_exhausted");
  guarded<> sink(conninfo(), in_schema(schema));
  inject(schema, "40001", 1000);
  order_log log = ten_orders();
  using letters = co::memory::dead_letters<order_event, co::Buffered>;
  letters dl;
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
      p(log, sink, dl, co::settings{.batch_size = 10});
  CHECK_THROWS_AS(p.poll_once(), pg::serialization_failure);
  CHECK(dl.letters().empty());  // the world's failure is nobody's record
  CHECK(sink.stats().retries == 3);
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 0);
  CHECK_FALSE(sink.load_position(p0).has_value());
}

// ---- the world's failures ----------------------------------------------------------------

TEST_CASE("a full disk is the world's failure: not dead-lettered, the unit redone after it") {
  const std::string schema = fresh_schema(conninfo(), "t_disk_full");
  guarded<> sink(conninfo(), in_schema(schema));
  inject(schema, "53100", 1);
  order_log log = ten_orders();
  using letters = co::memory::dead_letters<order_event, co::Buffered>;
  letters dl;
  co::pipeline<order_log, guarded<>, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
      p(log, sink, dl, co::settings{.batch_size = 10});
  try {
    p.poll_once();
    FAIL("a full disk must surface");
  } catch (const pg::infrastructure_error& e) {
    CHECK(e.sqlstate() == "53100");
  }
  CHECK(dl.letters().empty());
  CHECK_FALSE(sink.load_position(p0).has_value());
  // The disk has room again: the next poll recovers and redoes the unit (order 7 is
  // refused by nothing here, so all ten commit).
  CHECK(p.run() == 10);
  CHECK(sink.load_position(p0) == co::position{10});
  client c(conninfo(), schema);
  CHECK(c.count("orders_flat") == 10);
}

TEST_CASE("a connection the server ended between units is reopened and the unit sent again") {
  const std::string schema = fresh_schema(conninfo(), "t_terminated");
  guarded<> sink(conninfo(), in_schema(schema));
  sink.begin();
  sink.claim(p0, co::epoch{1});
  sink.commit();
  const auto backend = PQbackendPID(sink.database().get());
  client admin(conninfo());
  admin.exec("SELECT pg_terminate_backend(" + std::to_string(backend) + ")");
  sink.begin();
  for (std::int64_t i = 0; i < 10; ++i)
    sink.apply(p0, co::offset{i}, ev(i, 1));
  sink.store_position(p0, co::position{10});
  sink.commit();
  CHECK(sink.database().connects() == 2);
  CHECK(sink.load_position(p0) == co::position{10});
  CHECK(client(conninfo(), schema).count("orders_flat") == 10);
}

TEST_CASE("a network break between units is connection_lost: reopened, the unit sent again") {
  // No answer from the server this time: the socket is shut down under libpq, which then fails
  // to send the unit's pipeline. That is a lost connection like a terminated session, and the
  // buffered unit -- none of which reached the server -- goes again on a new connection.
  const std::string schema = fresh_schema(conninfo(), "t_network_break");
  guarded<> sink(conninfo(), in_schema(schema));
  sink.begin();
  sink.claim(p0, co::epoch{1});
  sink.commit();
  REQUIRE(::shutdown(PQsocket(sink.database().get()), SHUT_RDWR) == 0);
  sink.begin();
  for (std::int64_t i = 0; i < 10; ++i)
    sink.apply(p0, co::offset{i}, ev(i, 1));
  sink.store_position(p0, co::position{10});
  sink.commit();
  CHECK(sink.database().connects() == 2);
  CHECK(sink.load_position(p0) == co::position{10});
  CHECK(client(conninfo(), schema).count("orders_flat") == 10);

  // A call on a connection already gone is connection_lost too (it was a plain
  // infrastructure_error, which a caller that reopens on connection_lost would not reopen).
  REQUIRE(::shutdown(PQsocket(sink.database().get()), SHUT_RDWR) == 0);
  CHECK_THROWS_AS(sink.database().exec("SELECT 1"), pg::connection_lost);
  sink.database().drop();
  CHECK_THROWS_AS(sink.database().exec("SELECT 1"), pg::connection_lost);
  CHECK_THROWS_AS(sink.database().send("SELECT 1"), pg::connection_lost);
}

TEST_CASE("a connection lost inside a transaction fails it and is reopened by the next one") {
  const std::string schema = fresh_schema(conninfo(), "t_lost_inside");
  guarded<> sink(conninfo(), in_schema(schema));
  sink.begin();
  sink.claim(p0, co::epoch{1});  // the transaction is open on the server now
  client admin(conninfo());
  admin.exec("SELECT pg_terminate_backend(" + std::to_string(PQbackendPID(sink.database().get())) +
             ")");
  sink.apply(p0, co::offset{0}, ev(1, 1));
  sink.store_position(p0, co::position{1});
  CHECK_THROWS_AS(sink.commit(), pg::connection_lost);
  sink.rollback();
  CHECK(sink.owner_epoch(p0) == co::epoch{0});  // the claim went with its transaction
  sink.begin();
  sink.claim(p0, co::epoch{1});
  sink.apply(p0, co::offset{0}, ev(1, 1));
  sink.store_position(p0, co::position{1});
  sink.commit();
  CHECK(sink.load_position(p0) == co::position{1});
}

TEST_CASE("a claim waits for a stuck transaction only as long as lock_timeout") {
  const std::string schema = fresh_schema(conninfo(), "t_lock_timeout");
  pg::sink_options o = in_schema(schema);
  o.lock_timeout = std::chrono::milliseconds(200);
  guarded<> sink(conninfo(), o);
  sink.begin();
  sink.claim(p0, co::epoch{1});
  sink.commit();
  client stuck(conninfo(), schema);
  stuck.exec("BEGIN");
  stuck.exec("SELECT * FROM commit_order_positions FOR UPDATE");
  sink.begin();
  try {
    sink.claim(p0, co::epoch{2});
    FAIL("the claim must not wait for ever");
  } catch (const pg::infrastructure_error& e) {
    CHECK(e.sqlstate() == "55P03");
  }
  sink.rollback();
  stuck.exec("ROLLBACK");
  sink.begin();
  CHECK_NOTHROW(sink.claim(p0, co::epoch{2}));
  sink.commit();
}
