// SPDX-License-Identifier: BSL-1.0
// A restart against a file log whose retention deleted records the consumer never applied:
// the pipeline refuses with position_lost, naming both offsets, instead of resuming from what
// is left.
#include <doctest/doctest.h>

#include <string>

#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace co = commit_order;
namespace sq = commit_order::sqlite;
using crash_lab::order_event;
using crash_lab::orders_flat;
using test_support::scratch_dir;

namespace {
using log_t = co::file::log<order_event>;
// 16-byte segment header + five 40-byte frames.
const co::file::log_options five_per_segment{.segment_bytes = 16 + 5 * 40};

void append_orders(log_t& log, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t at = log.end().value();
    log.append(order_event{at % 7, 100, at * 10, at / 7 + 1});
  }
}

std::int64_t count_rows(sq::connection& db) {
  auto q = db.prepare("SELECT count(*) FROM orders_flat");
  return q.step() ? q.column_int64(0) : -1;
}
}  // namespace

TEST_CASE("AtLeastOnce: a stored position behind retention is position_lost on restart") {
  scratch_dir dir;
  using sink_t = sq::guarded_upsert_sink<orders_flat>;
  using store_t = co::file::position_store;
  using pipeline_t = co::pipeline<log_t, sink_t, co::AtLeastOnce<>, co::with_store<store_t>>;
  {
    log_t log(dir / "log", five_per_segment);
    append_orders(log, 30);
    sink_t sink(dir / "orders.sqlite");
    store_t store(dir / "orders.position");
    pipeline_t p(log, sink, store, co::settings{.batch_size = 6});
    CHECK(p.poll_once() == 6);
    CHECK(p.poll_once() == 6);
    CHECK(store.load() == co::position{12});
  }  // the consumer stops here ...
  {
    // ... while the producer keeps appending and retention deletes old segments.
    log_t log(dir / "log", five_per_segment);
    append_orders(log, 20);
    log.truncate_before(co::position{23});
    CHECK(log.earliest() == co::position{20});
  }
  log_t log(dir / "log", five_per_segment);
  sink_t sink(dir / "orders.sqlite");
  store_t store(dir / "orders.position");
  pipeline_t p(log, sink, store, co::settings{.batch_size = 6});
  try {
    p.recover();
    FAIL("recover() resumed from a position the log no longer holds");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == co::position{12});
    CHECK(e.earliest() == co::position{20});
    CHECK(std::string(e.what()).find("12") != std::string::npos);
    CHECK(std::string(e.what()).find("20") != std::string::npos);
  }
  // Nothing was read or written past the refusal.
  CHECK(store.load() == co::position{12});
  CHECK(sink.applied_watermark() == co::offset{11});
}

TEST_CASE("TransactionalPosition: retention by size during appends makes the restart refuse") {
  scratch_dir dir;
  using sink_t = sq::guarded_upsert_sink<orders_flat>;
  using pipeline_t = co::pipeline<log_t, sink_t, co::TransactionalPosition<>>;
  co::file::log_options retained = five_per_segment;
  retained.retention_bytes = 3 * (16 + 5 * 40);
  {
    log_t log(dir / "log", retained);
    append_orders(log, 12);
    sink_t sink(dir / "orders.sqlite");
    pipeline_t p(log, sink, co::settings{.batch_size = 4});
    CHECK(p.poll_once() == 4);
    CHECK(sink.load_position() == co::position{4});
    append_orders(log, 20);  // rolls, and each roll enforces the retention budget
    CHECK(log.earliest() > co::position{4});
  }
  log_t log(dir / "log", retained);
  sink_t sink(dir / "orders.sqlite");
  const auto rows_before = count_rows(sink.database());
  pipeline_t p(log, sink, co::settings{.batch_size = 4});
  CHECK_THROWS_AS(p.run(), co::position_lost);
  CHECK(sink.load_position() == co::position{4});
  CHECK(count_rows(sink.database()) == rows_before);
}

TEST_CASE("a restart from a retained position resumes exactly there") {
  scratch_dir dir;
  using sink_t = sq::guarded_upsert_sink<orders_flat>;
  using pipeline_t = co::pipeline<log_t, sink_t, co::TransactionalPosition<>>;
  {
    log_t log(dir / "log", five_per_segment);
    append_orders(log, 30);
    sink_t sink(dir / "orders.sqlite");
    pipeline_t p(log, sink, co::settings{.batch_size = 7});
    CHECK(p.poll_once() == 7);
    CHECK(p.poll_once() == 7);
    log.truncate_before(co::position{14});  // deletes [0, 10): all applied
  }
  log_t log(dir / "log", five_per_segment);
  sink_t sink(dir / "orders.sqlite");
  pipeline_t p(log, sink, co::settings{.batch_size = 7});
  CHECK(p.recover() == co::position{14});
  CHECK(p.run() == 16);
  CHECK(sink.load_position() == co::position{30});
  CHECK(sink.applied_watermark() == co::offset{29});
}
