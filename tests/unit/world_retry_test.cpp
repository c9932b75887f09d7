// SPDX-License-Identifier: BSL-1.0
// retry_world: the world's transient failures (an API answering 503, a busy database) are tried
// again after a wait, the position held, the record never blamed; a record's own failure still
// goes to the handling it names; spent tries stop the pipeline with the world's own error.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <vector>

#include <commit_order/adapters/memory/manual_executor.hpp>
#include <commit_order/adapters/memory/synchronized.hpp>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;
using namespace std::chrono_literals;

namespace {

// A user's sink in front of an API: the calls it made, and the offsets the API answers 503 to
// (how many times each; -1 for ever). `record_fault` makes the failure the record's instead.
template <class Inner>
struct api_sink : co::memory::forwarding_sink<Inner&> {
  using co::memory::forwarding_sink<Inner&>::forwarding_sink;
  std::map<co::offset, int> unavailable{};
  bool record_fault = false;
  bool rollback_throws = false;
  std::size_t calls = 0;
  co::write_outcome apply(co::offset o, const order_event& e) {
    ++calls;
    if (auto it = unavailable.find(o); it != unavailable.end() && it->second != 0) {
      if (it->second > 0)
        --it->second;
      if (record_fault)
        throw std::runtime_error("value refused");
      throw co::infrastructure_error("503 service unavailable");
    }
    return this->inner().apply(co::partition_id{0}, o, e);
  }
  void rollback() requires co::partitioned_transactional_sink<Inner> {
    this->inner().rollback();
    if (rollback_throws)
      throw co::infrastructure_error("connection lost during ROLLBACK");
  }
};

// Records every try again and its wait.
struct waits_observer {
  std::vector<std::size_t> attempts;  // 1 for a write's (or unit's) first try again, ...
  std::vector<std::chrono::milliseconds> waits;
  std::size_t rows = 0;
  void on(co::events::world_retried, std::size_t attempt, std::chrono::milliseconds wait) {
    attempts.push_back(attempt);
    waits.push_back(wait);
  }
  void on(co::events::row_written, co::offset) { ++rows; }
};

const co::settings no_wait{.batch_size = 500, .world_backoff = {.first = 0ms, .longest = 0ms}};

}  // namespace

TEST_CASE("backoff doubles from the first wait up to the longest") {
  constexpr co::backoff b{.first = 100ms, .longest = 350ms};
  CHECK(b.before(1) == 100ms);
  CHECK(b.before(2) == 200ms);
  CHECK(b.before(3) == 350ms);
  CHECK(b.before(40) == 350ms);
  CHECK(co::backoff{.first = 0ms, .longest = 5ms}.before(3) == 0ms);
}

TEST_CASE("an API that answers 503 now and then costs one call per refusal, nothing replayed") {
  // 3,000 records; every 10th is refused once. Stopped and restarted, each refusal would replay
  // its unit; tried again in place, it costs exactly one more call.
  order_log log = make_log(3000, 3000);
  guarded_table table;
  api_sink<guarded_table> sink{table};
  for (std::int64_t i = 0; i < 3000; i += 10)
    sink.unavailable[co::offset{i}] = 1;
  store st;
  co::pipeline<order_log, api_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::retry_world<3>>, co::with_observer<waits_observer>>
      p(log, sink, st, no_wait);
  CHECK(p.run() == 3000);
  CHECK(sink.calls == 3300);
  CHECK(p.observer().waits.size() == 300);
  CHECK(p.observer().rows == 3000);
  CHECK(table.size() == 3000);
  CHECK(st.load() == co::position{3000});
}

TEST_CASE("spent tries stop the pipeline with the world's error, the position below the record") {
  order_log log = make_log(6, 6);
  guarded_table table;
  api_sink<guarded_table> sink{table};
  sink.unavailable[co::offset{3}] = -1;
  store st;
  co::memory::dead_letters<order_event> letters;
  co::pipeline<order_log, api_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::retry_world<2, co::dead_letter<1>>>,
               co::with_dead_letters<co::memory::dead_letters<order_event>>,
               co::with_observer<waits_observer>>
      p(log, sink, st, letters, no_wait);
  CHECK_THROWS_WITH_AS(p.poll_once(), "503 service unavailable", co::infrastructure_error);
  CHECK(sink.calls == 4 + 2);  // offsets 0..3, and offset 3 twice more
  CHECK(p.observer().attempts == std::vector<std::size_t>{1, 2});
  CHECK(letters.letters().empty());  // the world's failure is never the record's
  CHECK_FALSE(st.load().has_value());
  sink.unavailable.clear();  // the API is back: a restart finishes, nothing missing
  CHECK(p.run() == 6);
  CHECK(table.size() == 6);
  CHECK(st.load() == co::position{6});
}

TEST_CASE("a record's own failure still goes to the handling retry_world names") {
  order_log log = make_log(6, 6);
  guarded_table table;
  api_sink<guarded_table> sink{table};
  sink.record_fault = true;
  sink.unavailable[co::offset{3}] = -1;
  store st;
  co::memory::dead_letters<order_event> letters;
  co::pipeline<order_log, api_sink<guarded_table>, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::retry_world<5, co::dead_letter<1>>>,
               co::with_dead_letters<co::memory::dead_letters<order_event>>,
               co::with_observer<waits_observer>>
      p(log, sink, st, letters, no_wait);
  CHECK(p.run() == 6);
  CHECK(p.observer().waits.empty());
  REQUIRE(letters.letters().size() == 1);
  CHECK(letters.letters()[0].source_offset == co::offset{3});
  CHECK(sink.calls == 6 + 1);  // dead_letter<1>: one retry of the record's own
}

TEST_CASE("a transactional unit the world failed is rolled back and run again whole") {
  order_log log = make_log(8, 8);
  guarded_tx_table table;
  api_sink<guarded_tx_table> sink{table};
  sink.unavailable[co::offset{5}] = 2;
  co::pipeline<order_log, api_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_error_handling<co::retry_world<2>>, co::with_observer<waits_observer>>
      p(log, sink, co::settings{.batch_size = 4, .world_backoff = {.first = 1ms, .longest = 1ms}});
  CHECK(p.run() == 8);
  CHECK(p.observer().attempts == std::vector<std::size_t>{1, 2});
  CHECK(p.observer().waits == std::vector<std::chrono::milliseconds>{1ms, 1ms});
  CHECK(sink.calls == 4 + 2 * 2 + 4);  // the second unit ran three times, up to its offset 5
  CHECK(table.size() == 8);
  CHECK(table.load_position() == co::position{8});

  SUBCASE("spent: nothing of the unit stays, the position is held") {
    order_log log2 = make_log(8, 8);
    guarded_tx_table table2;
    api_sink<guarded_tx_table> sink2{table2};
    sink2.unavailable[co::offset{5}] = -1;
    co::pipeline<order_log, api_sink<guarded_tx_table>, co::TransactionalPosition<>,
                 co::with_error_handling<co::retry_world<2>>>
        q(log2, sink2, co::settings{.batch_size = 4, .world_backoff = {0ms, 0ms}});
    CHECK(q.poll_once() == 4);
    CHECK_THROWS_AS(q.poll_once(), co::infrastructure_error);
    CHECK(table2.size() == 4);
    CHECK(table2.load_position() == co::position{4});
  }
}

TEST_CASE("a rollback that failed is not tried again: the sink's state is unknown") {
  order_log log = make_log(4, 4);
  guarded_tx_table table;
  api_sink<guarded_tx_table> sink{table};
  sink.unavailable[co::offset{1}] = 1;
  sink.rollback_throws = true;
  co::pipeline<order_log, api_sink<guarded_tx_table>, co::TransactionalPosition<>,
               co::with_error_handling<co::retry_world<3>>, co::with_observer<waits_observer>>
      p(log, sink, no_wait);
  CHECK_THROWS_AS(p.poll_once(), co::rollback_failed);
  CHECK(p.observer().waits.empty());
}

TEST_CASE("writes handed to an executor are tried again on the worker") {
  using table_t = co::memory::synchronized<guarded_table>;
  order_log log = make_log(6, 6);
  table_t table;
  api_sink<table_t> sink{table};
  sink.unavailable[co::offset{2}] = 2;
  store st;
  co::memory::manual_executor ex;
  co::pipeline<order_log, api_sink<table_t>, co::AtLeastOnce<>, co::with_store<store>,
               co::with_error_handling<co::retry_world<2>>,
               co::with_executor<co::memory::manual_executor>>
      p(log, sink, st, ex, no_wait);
  CHECK(p.poll_once() == 6);
  ex.run_all();
  CHECK(p.poll_once() == 0);
  CHECK(sink.calls == 6 + 2);
  CHECK(st.load() == co::position{6});
}

TEST_CASE("a backoff whose first wait is longer than its longest is refused") {
  order_log log = make_log(2, 2);
  guarded_table table;
  store st;
  CHECK_THROWS_WITH_AS(
      (co::pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>,
                    co::with_error_handling<co::retry_world<1>>>(
          log, table, st, co::settings{.world_backoff = {.first = 2s, .longest = 1s}})),
      doctest::Contains("world_backoff"), std::invalid_argument);
}

namespace {
// A COMMIT that took effect and whose answer was lost: what a database connection cut after
// COMMIT left it reports (postgres::commit_in_doubt is one).
struct answer_lost final : co::infrastructure_error, co::outcome_unknown {
  answer_lost() : co::infrastructure_error("COMMIT sent, answer lost: outcome unknown") {}
};
struct lost_answer_sink : co::memory::forwarding_sink<guarded_tx_table&> {
  using co::memory::forwarding_sink<guarded_tx_table&>::forwarding_sink;
  int lose_answers = 1;
  std::size_t writes = 0;
  co::write_outcome apply(co::offset o, const order_event& e) {
    ++writes;
    return this->inner().apply(co::partition_id{0}, o, e);
  }
  void commit() {
    this->inner().commit();
    if (writes > 0 && lose_answers > 0) {  // a unit's commit, not recovery's claim
      --lose_answers;
      throw answer_lost();
    }
  }
};
}  // namespace

TEST_CASE("retry_world never runs again a unit whose commit's outcome is unknown") {
  // The unit committed; only its answer was lost. Run again in place, every row would be
  // written a second time (a table without a guard would keep both). The pipeline stops
  // instead, and recovery reads where the unit ended.
  order_log log = make_log(20, 20);
  guarded_tx_table table;
  lost_answer_sink sink{table};
  using pipeline_t = co::pipeline<order_log, lost_answer_sink, co::TransactionalPosition<>,
                                  co::with_error_handling<co::retry_world<3>>>;
  {
    pipeline_t p(log, sink, no_wait);
    CHECK_THROWS_AS(p.poll_once(), answer_lost);
  }
  CHECK(sink.writes == 20);  // once each
  CHECK(table.size() == 20);
  CHECK(table.load_position() == co::position{20});
  pipeline_t restarted(log, sink, no_wait);
  CHECK(restarted.recover() == co::position{20});
  CHECK(restarted.run() == 0);
  CHECK(sink.writes == 20);
}
