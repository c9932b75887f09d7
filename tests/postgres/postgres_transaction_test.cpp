// SPDX-License-Identifier: BSL-1.0
// The PostgreSQL sink's transaction, against a real server: reading progress sends nothing
// (watched at the connection, with libpq's protocol trace) and reports what is durable.
#include <doctest/doctest.h>

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <commit_order/adapters/memory.hpp>

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
