// SPDX-License-Identifier: BSL-1.0
// A sink whose rows are durable only at flush() (co::flushing_sink, a producer waiting for its
// acknowledgements): the pipeline flushes at the end of every unit's write step, and before it
// commits a failed unit's prefix, so that no position it stores passes a row still in flight.
// The store below checks exactly that at every commit; a wrapper (forwarding_sink) passes the
// flush on.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <commit_order/adapters/memory/synchronized.hpp>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {

/// Rows handed over are buffered; flush() makes them durable, or throws and drops them.
struct buffering_stream {
  using row_type = order_event;
  using capabilities = co::capabilities<co::AppendOnly, co::Emits, co::Flushed, co::Volatile>;

  void apply(co::offset o, const order_event&) {
    if (refused && o == *refused)
      throw std::invalid_argument("the record's message is refused");
    buffer.push_back(o.value());
  }
  void flush() {
    ++flushes;
    if (flushes == failing_flush) {
      buffer.clear();  // lost in flight: the unit must not be committed
      throw co::infrastructure_error("the brokers did not acknowledge the unit");
    }
    durable.insert(buffer.begin(), buffer.end());
    copies += buffer.size();
    buffer.clear();
  }

  std::vector<std::int64_t> buffer;
  std::multiset<std::int64_t> durable;
  std::size_t copies = 0;
  int flushes = 0;
  int failing_flush = -1;
  std::optional<co::offset> refused;
};

/// A position store that checks, at every commit, that every offset before the position is
/// durable in the stream.
struct checking_store {
  using capabilities = co::capabilities<co::Volatile>;
  explicit checking_store(const buffering_stream& s) : stream(&s) {}
  const buffering_stream* stream;
  std::optional<co::position> stored;
  int commits = 0;
  int violations = 0;

  [[nodiscard]] std::optional<co::position> load() const { return stored; }
  void commit(co::position p) {
    ++commits;
    for (std::int64_t o = stored ? stored->value() : 0; o < p.value(); ++o)
      if (!stream->durable.contains(o))
        ++violations;
    stored = p;
  }
};

void fill(order_log& log, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    log.append(order_event{i % 7, 1, i});
}

static_assert(co::flushing_sink<buffering_stream>);
static_assert(co::flushing_sink<co::memory::synchronized<buffering_stream>>);
static_assert(co::flushing_sink<co::memory::forwarding_sink<buffering_stream&>>);
static_assert(!co::flushing_sink<append_table>);
// Emits: the copies a replay appends are the next hop's, and the type says there may be some.
static_assert(
    co::is_legal_v<order_log, buffering_stream, co::AtLeastOnce<>, co::with_store<checking_store>>);
static_assert(std::is_same_v<co::pipeline<order_log, buffering_stream, co::AtLeastOnce<>,
                                          co::with_store<checking_store>>::guarantee,
                             co::MayDuplicate>);

}  // namespace

TEST_CASE("flushing sink: each unit is flushed before its position is committed") {
  order_log log;
  fill(log, 100);
  buffering_stream stream;
  checking_store store(stream);
  co::pipeline<order_log, buffering_stream, co::AtLeastOnce<>, co::with_store<checking_store>> p(
      log, stream, store, co::settings{.batch_size = 16});
  p.run();
  CHECK(store.stored == co::position{100});
  CHECK(store.violations == 0);
  CHECK(stream.flushes == 7);  // one per unit: 6 of 16 and one of 4
  CHECK(stream.copies == 100);
  CHECK(stream.buffer.empty());
}

TEST_CASE("flushing sink: under EveryRecord, and through a wrapper, the same") {
  order_log log;
  fill(log, 10);
  buffering_stream stream;
  checking_store store(stream);
  using wrapped = co::memory::forwarding_sink<buffering_stream&>;
  wrapped w(stream);
  co::pipeline<order_log, wrapped, co::AtLeastOnce<co::EveryRecord>, co::with_store<checking_store>>
      p(log, w, store, co::settings{.batch_size = 4});
  p.run();
  CHECK(store.stored == co::position{10});
  CHECK(store.violations == 0);
  CHECK(stream.flushes == 10);
}

TEST_CASE("flushing sink: a flush that fails leaves the position, and the unit is read again") {
  order_log log;
  fill(log, 48);
  buffering_stream stream;
  stream.failing_flush = 2;  // the second unit's rows are lost in flight
  checking_store store(stream);
  {
    co::pipeline<order_log, buffering_stream, co::AtLeastOnce<>, co::with_store<checking_store>> p(
        log, stream, store, co::settings{.batch_size = 16});
    CHECK_THROWS_AS(p.run(), co::infrastructure_error);
  }
  CHECK(store.stored == co::position{16});
  CHECK(store.violations == 0);
  co::pipeline<order_log, buffering_stream, co::AtLeastOnce<>, co::with_store<checking_store>> p(
      log, stream, store, co::settings{.batch_size = 16});
  p.run();
  CHECK(store.stored == co::position{48});
  CHECK(store.violations == 0);
  for (std::int64_t o = 0; o < 48; ++o)
    CHECK(stream.durable.count(o) == 1);  // nothing of the failed unit had landed
}

TEST_CASE("flushing sink: a record refused mid-unit commits the flushed prefix, never past it") {
  order_log log;
  fill(log, 40);
  buffering_stream stream;
  stream.refused = co::offset{21};
  checking_store store(stream);
  co::pipeline<order_log, buffering_stream, co::AtLeastOnce<>, co::with_store<checking_store>> p(
      log, stream, store, co::settings{.batch_size = 16});
  bool failed_at_21 = false;
  try {
    p.run();
  } catch (const co::record_failed& e) {
    failed_at_21 = e.failed() == co::offset{21};
  }
  CHECK(failed_at_21);
  // The records 16..20 of the second unit were handed over before the refusal: flushed, then
  // covered, so a restart resumes at the refused record.
  CHECK(store.stored == co::position{21});
  CHECK(store.violations == 0);
}

TEST_CASE(
    "flushing sink: dead-lettered records pass, and the rest is flushed before the position") {
  order_log log;
  fill(log, 32);
  buffering_stream stream;
  stream.refused = co::offset{5};
  checking_store store(stream);
  co::memory::dead_letters<order_event, co::Volatile> letters;
  co::pipeline<order_log, buffering_stream, co::AtLeastOnce<>, co::with_store<checking_store>,
               co::with_dead_letters<co::memory::dead_letters<order_event, co::Volatile>>,
               co::with_error_handling<co::dead_letter<0>>>
      p(log, stream, store, letters, co::settings{.batch_size = 16});
  p.run();
  CHECK(store.stored == co::position{32});
  CHECK(letters.letters().size() == 1);
  // The checking store counts the dead letter's offset as missing from the stream: the one
  // record the error handling gave up on, as it says.
  CHECK(store.violations == 1);
  CHECK(stream.copies == 31);
}

TEST_CASE("flushing sink: under AtMostOnce a refused record loses what the error says, no more") {
  order_log log;
  fill(log, 40);
  buffering_stream stream;
  stream.refused = co::offset{21};
  co::memory::position_store<co::Volatile> store;
  co::pipeline<order_log, buffering_stream, co::AtMostOnce<>,
               co::with_store<co::memory::position_store<co::Volatile>>>
      p(log, stream, store, co::settings{.batch_size = 16});
  std::optional<co::position> lost_until;
  try {
    p.run();
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{21});
    lost_until = e.lost_until();
  }
  REQUIRE(lost_until);
  CHECK(*lost_until == co::position{32});  // the position went first, over the whole unit
  // Everything before the refused record is durable: the rows 16..20 handed over before it
  // were flushed, not left in the buffer to die with the process.
  for (std::int64_t o = 0; o < 21; ++o)
    CHECK(stream.durable.count(o) == 1);
  CHECK(stream.buffer.empty());
}

TEST_CASE("flushing sink: a unit the world fails before its flush is flushed to forget it") {
  order_log log;
  fill(log, 32);
  struct failing_once : buffering_stream {
    int failures_left = 1;
    void apply(co::offset o, const order_event& e) {
      if (o == co::offset{20} && failures_left-- > 0)
        throw co::infrastructure_error("the world failed the record's write");
      buffering_stream::apply(o, e);
    }
  };
  failing_once stream;
  checking_store store(stream);
  co::pipeline<order_log, failing_once, co::AtLeastOnce<>, co::with_store<checking_store>> p(
      log, stream, store, co::settings{.batch_size = 16});
  CHECK_THROWS_AS(p.run(), co::infrastructure_error);
  // The rows 16..19 handed over before the failure were settled by a flush, not left for the
  // next unit's flush to count as its own.
  CHECK(stream.flushes == 2);
  CHECK(stream.buffer.empty());
  CHECK(store.stored == co::position{16});
  p.run();  // read again from 16: the copies of 16..19 are the replay the type declares
  CHECK(store.stored == co::position{32});
  CHECK(store.violations == 0);
  for (std::int64_t o = 16; o < 20; ++o)
    CHECK(stream.durable.count(o) == 2);
}
