// SPDX-License-Identifier: BSL-1.0
// A sink that sends a unit's rows only as the unit commits (the PostgreSQL sink does, as one
// statement) learns of a row's failure in commit(), after apply() returned. It names the
// record (row_failed), and the loop handles that record's failure as if apply() had thrown:
// dead-lettered, retried or stopping with record_failed. A name outside the unit is not the
// unit's to handle and propagates as it is.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/named_partition_log.hpp"
#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {

// Buffers the unit's rows and applies them to the table at commit(); a poisoned offset fails
// there, named through row_failed (or, with `misname`, naming an offset of no unit).
struct deferring_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = guarded_tx_table::capabilities;

  guarded_tx_table* table;
  std::map<co::offset, int> poison{};  // offset -> failures left (-1: for ever)
  bool misname = false;
  std::optional<co::offset> name_instead{};  // names this record instead of the failing one
  std::vector<std::pair<co::offset, order_event>> pending{};
  int commits_failed = 0;

  void apply(co::offset o, const order_event& row) { pending.emplace_back(o, row); }
  void begin() {
    pending.clear();
    table->begin();
  }
  void commit() {
    for (const auto& [o, row] : pending) {
      if (auto it = poison.find(o); it != poison.end() && it->second != 0) {
        if (it->second > 0)
          --it->second;
        ++commits_failed;
        pending.clear();
        try {
          throw std::runtime_error("constraint refused offset " + std::to_string(o.value()));
        } catch (...) {
          const co::offset named = misname ? co::offset{99999} : name_instead.value_or(o);
          std::throw_with_nested(
              co::row_failed(co::partition_id{0}, named, "constraint refused it"));
        }
      }
      table->apply(co::partition_id{0}, o, row);
    }
    pending.clear();
    table->commit();
  }
  void rollback() {
    pending.clear();
    table->rollback();
  }
  void store_position(co::position p) { table->store_position(co::partition_id{0}, p); }
  void store_position(co::position p, co::epoch e) {
    table->store_position(co::partition_id{0}, p, e);
  }
  std::optional<co::position> claim(co::epoch e) { return table->claim(co::partition_id{0}, e); }
  co::claimed claim_next() { return table->claim_next(co::partition_id{0}); }
  std::optional<co::position> load_position() const { return table->load_position(); }
};

constexpr auto one_batch = co::settings{.batch_size = 50};
using letters = co::memory::dead_letters<order_event>;

bool holds(const guarded_tx_table& t, std::int64_t order_id) {
  bool found = false;
  t.for_each([&](const auto& r) { found = found || r.row.order_id == order_id; });
  return found;
}

}  // namespace

TEST_CASE("a row that fails at commit is dead-lettered as its record, the rest commits") {
  order_log log = make_log(50, 50);
  guarded_tx_table table;
  letters dl;
  deferring_sink sink{&table, {{co::offset{17}, -1}}};
  co::pipeline<order_log, deferring_sink, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
      p(log, sink, dl, one_batch);
  CHECK(p.run() == 50);
  REQUIRE(dl.letters().size() == 1);
  CHECK(dl.letters()[0].source_offset == co::offset{17});
  CHECK(dl.letters()[0].event.order_id == 17);
  CHECK(table.size() == 49);
  CHECK_FALSE(holds(table, 17));
  CHECK(table.load_position() == co::position{50});
}

TEST_CASE("a row that fails at commit is retried as its record, then stops the pipeline") {
  order_log log = make_log(50, 50);
  guarded_tx_table table;
  deferring_sink sink{&table, {{co::offset{17}, -1}}};
  co::pipeline<order_log, deferring_sink, co::TransactionalPosition<>,
               co::with_error_handling<co::retry<2>>, co::with_observer<co::counting_observer>>
      p(log, sink, one_batch);
  try {
    p.poll_once();
    FAIL("the failure must surface");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{17});
    CHECK(e.committed() == co::position{0});
    CHECK_THROWS_AS(std::rethrow_if_nested(e), co::row_failed);
  }
  CHECK(sink.commits_failed == 3);  // the first try and two retries of the unit
  CHECK(p.observer().retries == 2);
  CHECK(table.size() == 0);
  CHECK_FALSE(table.load_position().has_value());
}

TEST_CASE("a row that fails once at commit is retried and then commits") {
  order_log log = make_log(50, 50);
  guarded_tx_table table;
  deferring_sink sink{&table, {{co::offset{17}, 1}}};
  co::pipeline<order_log, deferring_sink, co::TransactionalPosition<>,
               co::with_error_handling<co::retry<1>>>
      p(log, sink, one_batch);
  CHECK(p.run() == 50);
  CHECK(table.size() == 50);
  CHECK(table.load_position() == co::position{50});
}

TEST_CASE("a row_failed naming a record outside the unit is not the unit's to handle") {
  order_log log = make_log(50, 50);
  guarded_tx_table table;
  letters dl;
  deferring_sink sink{&table, {{co::offset{17}, -1}}, true};
  co::pipeline<order_log, deferring_sink, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
      p(log, sink, dl, one_batch);
  CHECK_THROWS_AS(p.poll_once(), co::row_failed);
  CHECK(dl.letters().empty());
  CHECK(table.size() == 0);
  CHECK_FALSE(table.load_position().has_value());
}

// A batch split at the transaction limit is several units; the failure path finds each unit's
// records from the unit's end and size, so a name is judged against the unit that failed only.
TEST_CASE("in a split batch, a row failing at commit is judged against its own unit") {
  order_log log = make_log(50, 50);
  guarded_tx_table table;
  letters dl;
  constexpr auto split = co::settings{.batch_size = 50, .max_transaction_rows = 20};
  using pipeline_t =
      co::pipeline<order_log, deferring_sink, co::TransactionalPosition<>,
                   co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>;
  SUBCASE("a record of the second unit is dead-lettered, the rest commits") {
    deferring_sink sink{&table, {{co::offset{27}, -1}}};
    pipeline_t p(log, sink, dl, split);
    CHECK(p.poll_once() == 50);
    REQUIRE(dl.letters().size() == 1);
    CHECK(dl.letters()[0].source_offset == co::offset{27});
    CHECK(table.size() == 49);
    CHECK(table.load_position() == co::position{50});
  }
  SUBCASE("a name from the first, committed unit is not the second unit's to handle") {
    // Fails once: handled as a record of this unit, it would be dead-lettered and the unit
    // re-run to success.
    deferring_sink sink{&table, {{co::offset{27}, 1}}};
    sink.name_instead = co::offset{5};
    pipeline_t p(log, sink, dl, split);
    CHECK_THROWS_AS(p.poll_once(), co::row_failed);
    CHECK(dl.letters().empty());
    CHECK(table.size() == 20);  // the first unit, committed before the second failed
    CHECK(table.load_position() == co::position{20});
  }
}

TEST_CASE("a row failed at commit is dead-lettered when the source names partition 3") {
  // A single-partition source whose records name the stream's partition (a Kafka
  // partition_source of the topic's partition 3). The loop hands a sink that has apply(o, row)
  // no partition, so the sink knows the row as partition 0's and names it so in row_failed,
  // as the PostgreSQL sink does. The record is the same record: it must be dead-lettered and
  // the rest of the unit committed, as over a source whose records name partition 0.
  order_log log = make_log(50, 50);
  named_partition_log src(log, co::partition_id{3});
  guarded_tx_table table;
  letters dl;
  deferring_sink sink{&table, {{co::offset{17}, -1}}};
  co::pipeline<named_partition_log, deferring_sink, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
      p(src, sink, dl, one_batch);
  std::size_t handled = 0;
  try {
    handled = p.run();
  } catch (const std::exception& e) {
    MESSAGE("the pipeline stopped: " << std::string(e.what()));
  }
  CHECK(handled == 50);
  REQUIRE(dl.letters().size() == 1);
  CHECK(dl.letters()[0].source_offset == co::offset{17});
  CHECK(table.load_position() == co::position{50});
}
