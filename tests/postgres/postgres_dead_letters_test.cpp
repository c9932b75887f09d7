// SPDX-License-Identifier: BSL-1.0
// postgres::dead_letters against a real server (fsync on: Synced): the pipeline's dead_letter<N>
// writes the record it gives up on there before the position passes it; a letter offered again
// for the same record is kept once; one of another record at the same coordinates is refused,
// never kept in place of the first; a consumer must name its stream.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg_orders.hpp"
#include "pg_support.hpp"

using namespace pg_test;

namespace {

const co::partition_id p0{0};
const co::partition_id p3{3};

/// A letter keeps the order id (text) as its key and the event's bytes as its value.
struct order_letter final {
  static std::optional<std::vector<std::byte>> key(const order_event& e) {
    const std::string id = std::to_string(e.order_id);
    std::vector<std::byte> b(id.size());
    std::memcpy(b.data(), id.data(), id.size());
    return b;
  }
  static std::optional<std::vector<std::byte>> value(const order_event& e) {
    if (e.total_cents == 0)
      return std::nullopt;  // stands for a tombstone: NULL, not zero bytes
    std::vector<std::byte> b(sizeof e);
    std::memcpy(b.data(), &e, sizeof e);
    return b;
  }
};
using letters = pg::dead_letters<order_event, order_letter>;

pg::dead_letter_options letter_options(const std::string& schema, std::string stream = "orders") {
  pg::dead_letter_options o;
  o.schema = schema;
  o.stream = std::move(stream);
  return o;
}

}  // namespace

TEST_CASE("dead_letters: the pipeline's refused record is kept in PostgreSQL before it passes") {
  const std::string schema = fresh_schema(synced_conninfo(), "t_dead_letters");
  guarded<pg::synced> sink(synced_conninfo(), in_schema(schema));
  client(synced_conninfo(), schema)
      .exec("ALTER TABLE orders_flat ADD CONSTRAINT total_not_negative CHECK (total_cents >= 0)");
  co::memory::log<order_event, co::Synced> log;
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(order_event{i, 100 + i, i == 7 ? -1 : 1000 + i, 1});
  letters dl(synced_conninfo(), letter_options(schema));
  static_assert(std::is_same_v<co::durability_t<letters>, co::Synced>);
  co::pipeline<decltype(log), guarded<pg::synced>, co::TransactionalPosition<>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters>>
      p(log, sink, dl, co::settings{.batch_size = 10});
  CHECK(p.run() == 10);
  CHECK(dl.letters() == 1);
  client c(synced_conninfo(), schema);
  CHECK(c.count("orders_flat") == 9);
  CHECK(c.count("commit_order_dead_letters") == 1);
  CHECK(c.count("commit_order_dead_letters WHERE stream = 'orders' AND source_partition = 0 AND "
                "source_offset = 7 AND key = '\\x37'::bytea AND octet_length(value) = 32 AND "
                "reason LIKE '%total_not_negative%'") == 1);
  CHECK(sink.load_position(p0) == co::position{10});
}

TEST_CASE("dead_letters: a record's letter is kept once, another record's at its place refused") {
  const std::string schema = fresh_schema(synced_conninfo(), "t_dead_letter_keys");
  letters dl(synced_conninfo(), letter_options(schema));
  const order_event e{42, 1, 500, 1};
  dl.put(p3, co::offset{9}, e, "first try");
  dl.put(p3, co::offset{9}, e, "the replay after a crash gives up again");
  CHECK(dl.letters() == 1);
  CHECK(dl.repeats() == 1);
  client c(synced_conninfo(), schema);
  CHECK(c.count("commit_order_dead_letters WHERE reason = 'first try'") == 1);

  // Other bytes at the same coordinates: another record (a second consumer under this stream
  // name, or a recreated topic). Neither kept in place of the first nor dropped unseen.
  CHECK_THROWS_WITH_AS(dl.put(p3, co::offset{9}, order_event{43, 1, 500, 1}, "other"),
                       doctest::Contains("two consumers share the stream name"),
                       pg::letter_conflict);
  // NULL is not zero bytes: a value-less letter differs from the one with bytes.
  CHECK_THROWS_AS(dl.put(p3, co::offset{9}, order_event{42, 1, 0, 1}, "null value"),
                  pg::letter_conflict);
  dl.put(p3, co::offset{10}, order_event{42, 1, 0, 1}, "a tombstone's letter");
  CHECK(c.count("commit_order_dead_letters WHERE source_offset = 10 AND value IS NULL") == 1);

  // Another stream keeps its own letters at the same coordinates.
  letters other(synced_conninfo(), letter_options(schema, "refunds"));
  other.put(p3, co::offset{9}, order_event{43, 1, 500, 1}, "refunds' own");
  CHECK(c.count("commit_order_dead_letters") == 3);

  CHECK_THROWS_WITH_AS(letters(synced_conninfo(), letter_options(schema, "")),
                       doctest::Contains("name the stream"), std::invalid_argument);
}

TEST_CASE("dead_letters: a reason quoting bytes that are not UTF-8 is kept, escaped") {
  // A JSON parser's error quotes the bytes it stopped at; a TEXT column refuses them raw, which
  // would stop the pipeline on exactly the message it was to put aside.
  const std::string schema = fresh_schema(synced_conninfo(), "t_dead_letter_reason");
  letters dl(synced_conninfo(), letter_options(schema));
  dl.put(p0, co::offset{1}, order_event{1, 1, 5, 1},
         "syntax error; last read: '\xff\xfe' \xc3\xa9");
  dl.put(p0, co::offset{2}, order_event{2, 1, 5, 1}, "overlong \xc0\xaf, surrogate \xed\xa0\x80");
  client c(synced_conninfo(), schema);
  CHECK(c.count("commit_order_dead_letters WHERE reason = 'syntax error; last read: ''\\xff\\xfe'' "
                "\xc3\xa9'") == 1);
  CHECK(c.count("commit_order_dead_letters WHERE reason = 'overlong \\xc0\\xaf, surrogate "
                "\\xed\\xa0\\x80'") == 1);
}
