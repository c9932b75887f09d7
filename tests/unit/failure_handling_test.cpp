// SPDX-License-Identifier: BSL-1.0
// No swallowed failures: "record 300 of 500 fails" under every policy and every error handling.
// The position never passes a failed record unless the policy had already committed past it
// (at-most-once), and then the error says which records were lost.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>

#include "support/flaky.hpp"
#include "support/named_partition_log.hpp"
#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {
constexpr co::offset bad{300};
constexpr auto one_batch = co::settings{.batch_size = 500};
using letters = co::memory::dead_letters<order_event>;

// 500 records, each a distinct order, so the table's size is the number of records applied.
order_log five_hundred() {
  return make_log(500, 500);
}

template <class Table>
bool holds(const Table& t, std::int64_t order_id) {
  bool found = false;
  t.for_each([&](const auto& r) { found = found || r.row.order_id == order_id; });
  return found;
}
}  // namespace

// ---- stop (the default) --------------------------------------------------------------------

TEST_CASE("stop / TransactionalPosition: the unit rolls back, the position stays") {
  order_log log = five_hundred();
  guarded_tx_table table;
  flaky_sink<guarded_tx_table> sink{table, {{bad, -1}}};
  co::pipeline<order_log, flaky_sink<guarded_tx_table>, co::TransactionalPosition<>> p(log, sink,
                                                                                       one_batch);
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == bad);
    CHECK(e.committed() == co::position{0});
    CHECK_FALSE(e.lost());
    CHECK(std::string(e.what()).find("offset 300") != std::string::npos);
    CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e), "sink rejected offset 300", std::runtime_error);
  }
  CHECK(table.size() == 0);
  CHECK_FALSE(table.load_position().has_value());
}

TEST_CASE("stop / AtLeastOnce: only the durable contiguous prefix is committed") {
  order_log log = five_hundred();
  guarded_table table;
  store st;
  flaky_sink<guarded_table> sink{table, {{bad, 1}}};
  using pipeline_t =
      co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>>;
  {
    pipeline_t p(log, sink, st, one_batch);
    try {
      p.poll_once();
      FAIL("the failure must surface");
    } catch (const co::record_failed& e) {
      CHECK(e.failed() == bad);
      CHECK(e.committed() == co::position{300});
      CHECK_FALSE(e.lost());
    }
  }
  CHECK(table.size() == 300);             // records 0..299 are durable
  CHECK(st.load() == co::position{300});  // never past 299
  // A restart resumes exactly at the failed record.
  pipeline_t restarted(log, sink, st, one_batch);
  CHECK(restarted.recover() == co::position{300});
  CHECK(restarted.run() == 200);
  CHECK(table.size() == 500);
}

TEST_CASE("stop: a source whose records name partition 3 reports partition 0's position") {
  // A single-partition source's one position is the pipeline's, whatever partition its
  // records name: the error, progress() and committed_position() all report it.
  order_log log = five_hundred();
  named_partition_log src(log, co::partition_id{3});
  guarded_table table;
  store st;
  flaky_sink<guarded_table> sink{table, {{bad, 1}}};
  co::pipeline<named_partition_log, flaky_sink<guarded_table>, co::AtLeastOnce<>,
               co::with_store<store>>
      p(src, sink, st, one_batch);
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == bad);
    CHECK(e.partition() == co::partition_id{3});  // the record, as its source names it
    CHECK(e.committed() == co::position{300});
  }
  CHECK(st.load() == co::position{300});
  CHECK(p.committed_position() == co::position{300});
  CHECK(p.committed_position(co::partition_id{3}) == co::position{300});
  CHECK(p.progress(co::partition_id{3}).committed == co::position{300});
  CHECK(p.progress(co::partition_id{3}).read == p.progress().read);
}

TEST_CASE("stop / AtMostOnce: the position had already passed it, and the error says so") {
  order_log log = five_hundred();
  append_table table;
  store st;
  flaky_sink<append_table> sink{table, {{bad, -1}}};
  co::pipeline<order_log, flaky_sink<append_table>, co::AtMostOnce<>, co::with_store<store>> p(
      log, sink, st, one_batch);
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == bad);
    CHECK(e.committed() == co::position{500});
    CHECK(e.lost());
    CHECK(e.lost_until() == co::position{500});
    CHECK(std::string(e.what()).find("records [300, 500) are lost") != std::string::npos);
  }
  CHECK(table.size() == 300);
  CHECK(st.load() == co::position{500});
}

TEST_CASE("stop / AtMostOnce into a transactional sink: only the failed record on is lost") {
  // The unit is one sink transaction, rolled back with the failed record; the position already
  // passed the unit. The records before the failed one were lost with it, while the error said
  // [300, 500) (found by the new-user review of issue 21): they are written again, alone.
  using tx_append = co::memory::table<order_event, co::no_key, co::capabilities<co::Transactional>>;
  order_log log = five_hundred();
  tx_append table;
  store st;
  flaky_sink<tx_append> sink{table, {{bad, -1}}};
  co::pipeline<order_log, flaky_sink<tx_append>, co::AtMostOnce<>, co::with_store<store>> p(
      log, sink, st, one_batch);
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == bad);
    CHECK(e.lost_until() == co::position{500});
    CHECK(std::string(e.what()).find("records [300, 500) are lost") != std::string::npos);
  }
  CHECK(table.size() == 300);
  CHECK(st.load() == co::position{500});
}

// The failed record is found wherever it sits in its unit: alone, first, in the middle or last
// of a longer one, and the rows before it are the ones written. (With g++, a plain sink's unit
// of one row is written in place and a longer one by a loop of its own that leaves a trace of
// the row it is at: pipeline_impl::rows_apart.)
TEST_CASE("stop: the failed record is named wherever it sits in its unit") {
  struct placement {
    std::size_t batch;
    co::offset failing;
  };
  const placement cases[] = {{1, co::offset{7}},   {2, co::offset{6}},    {2, co::offset{7}},
                             {10, co::offset{0}},  {10, co::offset{10}},  {10, co::offset{15}},
                             {10, co::offset{19}}, {500, co::offset{499}}};
  for (const placement& c : cases) {
    CAPTURE(c.batch);
    CAPTURE(c.failing.value());
    const std::int64_t unit_first =
        c.failing.value() - c.failing.value() % static_cast<std::int64_t>(c.batch);
    {  // AtLeastOnce: the position covers exactly the rows before the failed one
      order_log log = five_hundred();
      guarded_table table;
      store st;
      flaky_sink<guarded_table> sink{table, {{c.failing, -1}}};
      co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>>
          p(log, sink, st, co::settings{.batch_size = c.batch});
      try {
        p.run();
        FAIL("the failure must surface");
      } catch (const co::record_failed& e) {
        CHECK(e.failed() == c.failing);
        CHECK(e.committed() == co::position::at(c.failing));
      }
      CHECK(table.size() == static_cast<std::size_t>(c.failing.value()));
      CHECK(st.load().value_or(co::position{0}) == co::position::at(c.failing));
    }
    {  // AtMostOnce: the position had passed the whole unit
      order_log log = five_hundred();
      append_table table;
      store st;
      flaky_sink<append_table> sink{table, {{c.failing, -1}}};
      co::pipeline<order_log, flaky_sink<append_table>, co::AtMostOnce<>, co::with_store<store>> p(
          log, sink, st, co::settings{.batch_size = c.batch});
      try {
        p.run();
        FAIL("the failure must surface");
      } catch (const co::record_failed& e) {
        CHECK(e.failed() == c.failing);
        CHECK(e.lost());
      }
      CHECK(table.size() == static_cast<std::size_t>(c.failing.value()));
      const auto unit_end =
          std::min<std::int64_t>(unit_first + static_cast<std::int64_t>(c.batch), 500);
      CHECK(st.load() == co::position{unit_end});
    }
  }
}

TEST_CASE("stop, a plain sink: a throwing transform, a split batch, an exception of no std type") {
  SUBCASE("the transform refuses a record in the middle of a unit") {
    order_log log = five_hundred();
    guarded_table table;
    store st;
    auto refuse_305 = [](const order_event& e) {
      if (e.order_id == 305)
        throw std::invalid_argument("cannot map order 305");
      return e;
    };
    co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>,
                 co::with_transform<decltype(refuse_305)>>
        p(log, table, st, co::settings{.batch_size = 100});
    try {
      p.run();
      FAIL("the failure must surface");
    } catch (const co::record_failed& e) {
      CHECK(e.failed() == co::offset{305});
      CHECK(e.committed() == co::position{305});
      CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e), "cannot map order 305",
                           std::invalid_argument);
    }
    CHECK(table.size() == 305);
  }
  SUBCASE("the second split of a batch fails in its middle") {
    order_log log = five_hundred();
    guarded_table table;
    store st;
    flaky_sink<guarded_table> sink{table, {{co::offset{37}, -1}}};
    co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>> p(
        log, sink, st, co::settings{.batch_size = 100, .max_transaction_rows = 10});
    try {
      p.poll_once();
      FAIL("the failure must surface");
    } catch (const co::record_failed& e) {
      CHECK(e.failed() == co::offset{37});
      CHECK(e.committed() == co::position{37});
    }
    CHECK(table.size() == 37);
    CHECK(st.load() == co::position{37});
    CHECK(st.commits() == 4);  // splits [0,10), [10,20), [20,30), then the prefix [30,37)
  }
  SUBCASE("an exception of no std type passes through, blaming no record") {
    struct refusal {};
    struct odd_sink : co::memory::forwarding_sink<guarded_table&> {
      using co::memory::forwarding_sink<guarded_table&>::forwarding_sink;
      auto apply(co::offset o, const order_event& e) {
        if (o == co::offset{5})
          throw refusal{};
        return inner().apply(co::partition_id{0}, o, e);
      }
    };
    order_log log = make_log(10, 10);
    guarded_table table;
    odd_sink sink{table};
    store st;
    co::pipeline<order_log, odd_sink, co::AtLeastOnce<>, co::with_store<store>> p(log, sink, st);
    CHECK_THROWS_AS(p.poll_once(), refusal);
    CHECK(table.size() == 5);
    CHECK_FALSE(st.load().has_value());  // the unit's position was never committed
  }
}

TEST_CASE("a failure in the transform is a record failure like any other") {
  order_log log = five_hundred();
  guarded_tx_table table;
  auto refuse_300 = [](const order_event& e) {
    if (e.order_id == 300)
      throw std::invalid_argument("cannot map order 300");
    return e;
  };
  co::pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>,
               co::with_transform<decltype(refuse_300)>>
      p(log, table, co::settings{.batch_size = 100});
  CHECK(p.poll_once() == 100);
  CHECK(p.poll_once() == 100);
  CHECK(p.poll_once() == 100);
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == bad);
    CHECK(e.committed() == co::position{300});
  }
  CHECK(table.size() == 300);
}

// ---- retry<N> ------------------------------------------------------------------------------

TEST_CASE("retry / TransactionalPosition: a transient failure re-runs the unit and succeeds") {
  order_log log = five_hundred();
  guarded_tx_table table;
  flaky_sink<guarded_tx_table> sink{table, {{bad, 2}}};
  co::pipeline<order_log, flaky_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_error_handling<co::retry<3>>, co::with_observer<co::counting_observer>>
      p(log, sink, one_batch);
  CHECK(p.run() == 500);
  CHECK(table.size() == 500);
  CHECK(table.load_position() == co::position{500});
  CHECK(p.observer().retries == 2);
  CHECK(p.observer().units_committed == 1);
}

TEST_CASE("retry / AtLeastOnce and AtMostOnce retry the record in place") {
  order_log log = five_hundred();
  store st;
  SUBCASE("AtLeastOnce") {
    guarded_table table;
    flaky_sink<guarded_table> sink{table, {{bad, 3}}};
    co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
                 co::with_error_handling<co::retry<3>>, co::with_observer<co::counting_observer>>
        p(log, sink, st, one_batch);
    CHECK(p.run() == 500);
    CHECK(table.size() == 500);
    CHECK(p.observer().retries == 3);
    CHECK(st.load() == co::position{500});
  }
  SUBCASE("AtMostOnce") {
    // A retried write may have landed before it failed: only a sink that absorbs a second
    // application may be retried outside a transaction (rule R16), so this one is keyed.
    upsert_table table;
    flaky_sink<upsert_table> sink{table, {{bad, 1}}};
    co::pipeline<order_log, flaky_sink<upsert_table>, co::AtMostOnce<>, co::with_store<store>,
                 co::with_error_handling<co::retry<1>>, co::with_observer<co::counting_observer>>
        p(log, sink, st, one_batch);
    CHECK(p.run() == 500);
    CHECK(table.size() == 500);
    CHECK(p.observer().retries == 1);
  }
}

TEST_CASE("retry gives up after N and then stops like stop") {
  order_log log = five_hundred();
  guarded_table table;
  store st;
  flaky_sink<guarded_table> sink{table, {{bad, -1}}};
  co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::retry<2>>, co::with_observer<co::counting_observer>>
      p(log, sink, st, one_batch);
  CHECK_THROWS_AS(p.poll_once(), co::record_failed);
  CHECK(p.observer().retries == 2);
  CHECK(p.observer().records_failed == 1);
  CHECK(st.load() == co::position{300});
}

// ---- dead_letter<N> ------------------------------------------------------------------------

TEST_CASE("dead_letter / TransactionalPosition: the unit re-runs without the record") {
  order_log log = five_hundred();
  guarded_tx_table table;
  letters dl;
  flaky_sink<guarded_tx_table> sink{table, {{bad, -1}, {co::offset{301}, -1}}};
  co::pipeline<order_log, flaky_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<1>>, co::with_dead_letters<letters>,
               co::with_observer<co::counting_observer>>
      p(log, sink, dl, one_batch);
  CHECK(p.run() == 500);
  REQUIRE(dl.letters().size() == 2);
  CHECK(dl.letters()[0].source_offset == bad);
  CHECK(dl.letters()[0].event.order_id == 300);
  CHECK(dl.letters()[0].reason == "sink rejected offset 300");
  CHECK(dl.letters()[1].source_offset == co::offset{301});
  CHECK(table.size() == 498);
  CHECK_FALSE(holds(table, 300));
  CHECK(table.load_position() == co::position{500});
  CHECK(p.observer().retries == 2);  // one retry for each record before giving up on it
  CHECK(p.observer().dead_lettered == 2);
}

TEST_CASE("dead_letter / AtLeastOnce and AtMostOnce: the record goes aside, the rest goes on") {
  order_log log = five_hundred();
  store st;
  letters dl;
  SUBCASE("AtLeastOnce") {
    guarded_table table;
    flaky_sink<guarded_table> sink{table, {{bad, -1}}};
    co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
                 co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
        p(log, sink, st, dl, one_batch);
    CHECK(p.run() == 500);
    CHECK(table.size() == 499);
    CHECK(st.load() == co::position{500});
  }
  SUBCASE("AtMostOnce") {
    append_table table;
    flaky_sink<append_table> sink{table, {{bad, -1}}};
    co::pipeline<order_log, flaky_sink<append_table>, co::AtMostOnce<>, co::with_store<store>,
                 co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
        p(log, sink, st, dl, one_batch);
    CHECK(p.run() == 500);
    CHECK(table.size() == 499);
  }
  REQUIRE(dl.letters().size() == 1);
  CHECK(dl.letters()[0].source_offset == bad);
}

TEST_CASE("dead letters are keyed by their record: a replay after a crash adds none") {
  // Issue 21, item 16: a crash after the letter was written and before the unit committed
  // replays the unit, the record fails again, and a second letter was written for it.
  struct crash_after_first_letter {
    const letters* dl = nullptr;
    bool fired = false;
    void at(const co::fault_point& p) {
      if (!fired && dl != nullptr && !dl->letters().empty()) {
        fired = true;
        throw co::injected_crash{p};
      }
    }
  };
  order_log log = five_hundred();
  guarded_tx_table table;
  letters dl;
  flaky_sink<guarded_tx_table> sink{table, {{bad, -1}}};
  co::pipeline<order_log, flaky_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>,
               co::with_faults<crash_after_first_letter>>
      p(log, sink, dl, one_batch);
  p.faults().dl = &dl;
  CHECK_THROWS_AS(p.poll_once(), co::injected_crash);
  REQUIRE(dl.letters().size() == 1);
  CHECK_FALSE(table.load_position().has_value());  // the unit did not commit
  CHECK(p.run() == 500);                           // recovered: the unit again, from 0
  CHECK(table.load_position() == co::position{500});
  REQUIRE(dl.letters().size() == 1);  // one failed record, one letter
  CHECK(dl.letters()[0].source_offset == bad);
  CHECK(dl.repeats() == 1);
  // Keyed by partition too: the same offset of two partitions is two records.
  letters direct;
  direct.put(co::partition_id{0}, co::offset{5}, order_event{}, "a");
  direct.put(co::partition_id{1}, co::offset{5}, order_event{}, "b");
  direct.put(co::partition_id{0}, co::offset{5}, order_event{}, "a again");
  REQUIRE(direct.letters().size() == 2);
  CHECK(direct.letters()[1].source_partition == co::partition_id{1});
  CHECK(direct.repeats() == 1);
}

TEST_CASE("an allocation failure is the world's: never retried, never dead-lettered") {
  // Issue 21, item 11: a std::bad_alloc while a sink buffered a row was dead-lettered as the
  // record's failure, and the position moved past it.
  struct out_of_memory_at {
    guarded_tx_table* table = nullptr;
    using row_type = order_event;
    using key_type = order_key;
    using capabilities = guarded_tx_table::capabilities;
    co::offset at{};
    void apply(co::offset o, const order_event& e) {
      if (o == at)
        throw std::bad_alloc();
      table->apply(co::partition_id{0}, o, e);
    }
    void begin() { table->begin(); }
    void commit() { table->commit(); }
    void rollback() noexcept { table->rollback(); }
    [[nodiscard]] std::optional<co::position> load_position() const {
      return table->load_position();
    }
    void store_position(co::position p) { table->store_position(co::partition_id{0}, p); }
  };
  order_log log = five_hundred();
  guarded_tx_table table;
  letters dl;
  out_of_memory_at sink{&table, bad};
  co::pipeline<order_log, out_of_memory_at, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<2>>, co::with_dead_letters<letters>,
               co::with_observer<co::counting_observer>>
      p(log, sink, dl, one_batch);
  CHECK_THROWS_AS(p.poll_once(), std::bad_alloc);
  CHECK(dl.letters().empty());
  CHECK(p.observer().retries == 0);
  CHECK_FALSE(table.load_position().has_value());
  CHECK(table.size() == 0);
}

TEST_CASE("a failing dead-letter sink stops the pipeline before the position passes the record") {
  struct broken_letters {
    using capabilities = co::capabilities<co::Volatile>;
    void put(co::offset, const order_event&, const char*) {
      throw std::runtime_error("dead-letter store unavailable");
    }
  };
  order_log log = five_hundred();
  guarded_table table;
  store st;
  broken_letters dl;
  flaky_sink<guarded_table> sink{table, {{bad, -1}}};
  co::pipeline<order_log, flaky_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<broken_letters>>
      p(log, sink, st, dl, one_batch);
  CHECK_THROWS_AS(p.poll_once(), co::record_failed);
  CHECK(st.load() == co::position{300});
}

// ---- AutoCommit's hazard, in virtual time ---------------------------------------------------

TEST_CASE("AutoCommit moves the position past records whose write failed") {
  order_log log = make_log(50, 50);
  upsert_table table;
  store st;
  flaky_sink<upsert_table> sink{table, {{co::offset{30}, -1}}};
  manual_clock::current = {};
  co::pipeline<order_log, flaky_sink<upsert_table>, co::AtMostOnce<co::AutoCommit>,
               co::with_store<store>, co::with_clock<manual_clock>>
      p(log, sink, st, co::settings{.batch_size = 25});
  CHECK(p.poll_once() == 25);
  manual_clock::advance(std::chrono::seconds{5});
  try {
    p.poll_once();  // the timer fires right after this poll, before the write
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{30});
    CHECK(e.lost());
  }
  // The durable position says 30..49 are done; only 25..29 were written. A restart skips
  // 30..49 for good: at-most-once, whatever the write did.
  CHECK(st.load() == co::position{50});
  CHECK(table.size() == 30);
}
