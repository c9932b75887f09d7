// SPDX-License-Identifier: BSL-1.0
// recover(): the stored position is checked against what the source still has, and against
// what the sink holds, before a single record is read.
#include <doctest/doctest.h>

#include <string>

#include "support/flaky.hpp"
#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

using tx_pipeline = co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>>;
using alo_pipeline =
    co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>>;

TEST_CASE("a fresh consumer starts at the earliest retained record") {
  order_log log = make_log(10, 10);
  log.truncate_before(co::position{4});
  guarded_tx_table table;
  tx_pipeline p(log, table);
  CHECK(p.recover() == co::position{4});
  CHECK(p.run() == 6);
  CHECK(table.load_position() == co::position{10});
}

TEST_CASE("with an initial position, a consumer with nothing stored cannot start late") {
  // The consumer died before its first commit, and retention ran while it was down. Without
  // an initial position nothing says records 0..3 were ever due; with one, the gap is an error.
  order_log log = make_log(10, 10);
  log.truncate_before(co::position{4});
  guarded_table table;
  store st;
  alo_pipeline p(log, table, st, co::settings{.initial_position = co::position{0}});
  try {
    p.recover();
    FAIL("starting after the initial position must not be silent");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == co::position{0});
    CHECK(e.earliest() == co::position{4});
  }
  // Within retention, it is simply where the consumer starts.
  order_log fresh = make_log(10, 10);
  alo_pipeline q(fresh, table, st, co::settings{.initial_position = co::position{6}});
  CHECK(q.recover() == co::position{6});
  CHECK(q.run() == 4);
}

TEST_CASE("a stored position below earliest() is position_lost, naming both offsets") {
  order_log log = make_log(100, 10);
  guarded_table table;
  store st;
  {
    alo_pipeline p(log, table, st, co::settings{.batch_size = 30});
    CHECK(p.poll_once() == 30);
  }
  REQUIRE(st.load() == co::position{30});
  log.truncate_before(co::position{50});  // retention ran while the consumer was down

  alo_pipeline restarted(log, table, st);
  try {
    restarted.recover();
    FAIL("recovering into a deleted range must not succeed");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == co::position{30});
    CHECK(e.earliest() == co::position{50});
    const std::string what = e.what();
    CHECK(what.find("30") != std::string::npos);
    CHECK(what.find("50") != std::string::npos);
  }
  // Never an empty read, never a silent reset: nothing was consumed, the position is untouched.
  CHECK(st.load() == co::position{30});
  CHECK_THROWS_AS(restarted.poll_once(), co::position_lost);
  CHECK(table.size() == 10);
}

TEST_CASE("the same check holds under TransactionalPosition") {
  order_log log = make_log(20, 20);
  guarded_tx_table table;
  {
    tx_pipeline p(log, table, co::settings{.batch_size = 5});
    p.poll_once();
  }
  log.truncate_before(co::position{12});
  tx_pipeline restarted(log, table);
  CHECK_THROWS_AS(restarted.recover(), co::position_lost);
}

TEST_CASE("a stored position beyond the source's end is an error too") {
  order_log log = make_log(5, 5);
  guarded_table table;
  store st;
  st.commit(co::partition_id{0}, co::position{9});
  alo_pipeline p(log, table, st);
  try {
    p.recover();
    FAIL("a position past the end must not be accepted");
  } catch (const co::position_beyond_end& e) {
    CHECK(e.stored() == co::position{9});
    CHECK(e.end() == co::position{5});
  }
}

TEST_CASE("a sink row stamped at or above the stored position is an invariant violation") {
  order_log log = make_log(10, 10);
  guarded_tx_table table;
  {
    tx_pipeline p(log, table, co::settings{.batch_size = 4});
    p.poll_once();
  }
  REQUIRE(table.load_position() == co::position{4});
  // A bug elsewhere wrote a row from offset 7 without moving the position with it.
  table.apply(co::partition_id{0}, co::offset{7}, order_event{7, 1, 7});
  tx_pipeline restarted(log, table);
  try {
    restarted.recover();
    FAIL("rows above the position must be reported");
  } catch (const co::invariant_violation& e) {
    CHECK(e.stored() == co::position{4});
    CHECK(e.watermark() == co::offset{7});
  }
}

TEST_CASE("rows without any stored position are an invariant violation as well") {
  order_log log = make_log(3, 3);
  guarded_tx_table table;
  table.apply(co::partition_id{0}, co::offset{1}, order_event{1, 1, 1});
  tx_pipeline p(log, table);
  CHECK_THROWS_AS(p.recover(), co::invariant_violation);
}

TEST_CASE("after a failure the next poll recovers from the durable position") {
  order_log log = make_log(10, 10);
  guarded_tx_table table;
  flaky_sink<guarded_tx_table> sink{table, {{co::offset{6}, 1}}};
  co::pipeline<order_log, flaky_sink<guarded_tx_table>, co::TransactionalPosition<>> p(
      log, sink, co::settings{.batch_size = 4});
  CHECK(p.poll_once() == 4);
  CHECK_THROWS_AS(p.poll_once(), co::record_failed);
  // The source had been read to 8; the retry starts again at the committed 4, not at 8.
  CHECK(p.poll_once() == 4);
  CHECK(p.run() == 2);
  CHECK(table.size() == 10);
  CHECK(table.load_position() == co::position{10});
}
