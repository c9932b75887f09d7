// SPDX-License-Identifier: BSL-1.0
// Offsets, positions, capabilities, records and keys: the vocabulary the rules are written in.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <type_traits>

#include "support/orders.hpp"

namespace co = commit_order;
using test_support::order_event;

// ---- offset and position -------------------------------------------------------------------

static_assert(!std::is_convertible_v<int, co::offset>, "no raw integers in public APIs");
static_assert(!std::is_convertible_v<co::offset, co::position>,
              "an offset is not a position: the conversion says which one is meant");
static_assert(co::position::after(co::offset{41}) == co::position{42});
static_assert(co::position::at(co::offset{41}) == co::position{41});
static_assert(co::position{42}.covers(co::offset{41}) && !co::position{42}.covers(co::offset{42}));

TEST_CASE("a position is the offset of the next record to read") {
  const co::offset applied{88213};
  const co::position p = co::position::after(applied);
  CHECK(p.value() == 88214);
  CHECK(p.next_offset() == co::offset{88214});
  CHECK(p.covers(applied));
  CHECK_FALSE(p.covers(p.next_offset()));
  CHECK(co::position{10} - co::position{4} == 6);
  std::ostringstream os;
  os << applied << ' ' << p << ' ' << co::epoch{3};
  CHECK(os.str() == "88213 88214 3");
}

// ---- capabilities: nested alias or trait ---------------------------------------------------

struct declares_nested {
  using capabilities = co::capabilities<co::Idempotent, co::Synced, co::MaxTransactionRows<50>>;
};
struct third_party_sink {};  // a type the user does not own
template <>
struct co::capability_traits<third_party_sink> {
  using capabilities = co::capabilities<co::DuplicatesHarmless, co::Replicated>;
};

static_assert(co::has_capability_v<declares_nested, co::Idempotent>);
static_assert(!co::has_capability_v<declares_nested, co::Transactional>);
static_assert(std::is_same_v<co::durability_t<declares_nested>, co::Synced>);
static_assert(co::max_transaction_rows_v<declares_nested> == 50);
static_assert(co::has_capability_v<third_party_sink, co::DuplicatesHarmless>);
static_assert(std::is_same_v<co::durability_t<third_party_sink>, co::Replicated>);
static_assert(co::max_transaction_rows_v<third_party_sink> == 0);
// Durability is declared, never assumed: a part without a level is refused by S23-S25.
static_assert(!co::declares_durability<int>);
static_assert(co::declares_durability<co::memory::position_store<co::Volatile>>);
static_assert(co::Volatile::rank < co::Buffered::rank && co::Buffered::rank < co::Synced::rank &&
              co::Synced::rank < co::Replicated::rank);
// The testing kit's table and log are Volatile unless told otherwise.
static_assert(std::is_same_v<co::durability_t<test_support::upsert_table>, co::Volatile>);
static_assert(std::is_same_v<co::durability_t<test_support::order_log>, co::Volatile>);
static_assert(std::is_same_v<
              co::durability_t<co::memory::table<order_event, test_support::order_key,
                                                 co::capabilities<co::Idempotent, co::Synced>>>,
              co::Synced>);

// ---- records -------------------------------------------------------------------------------

struct plain_record {
  co::offset source_offset;
  int payload;
};
struct foreign_record {  // offset kept under another name
  long pos;
  int value;
};
template <>
struct co::record_traits<foreign_record> {
  static co::offset offset_of(const foreign_record& r) { return co::offset{r.pos}; }
  static int event_of(const foreign_record& r) { return r.value; }
};

static_assert(co::record<co::logged<order_event>>);
static_assert(co::record<plain_record>);
static_assert(co::record<foreign_record>);
static_assert(!co::record<order_event>, "an event without an offset is not a record");
static_assert(std::is_same_v<co::event_t<co::logged<order_event>>, order_event>);
static_assert(std::is_same_v<co::event_t<plain_record>, plain_record>);
static_assert(std::is_same_v<co::event_t<foreign_record>, int>);

TEST_CASE("offset_of and event_of read records of every shape") {
  const co::logged<order_event> l{co::offset{7}, order_event{1, 2, 3}};
  CHECK(co::offset_of(l) == co::offset{7});
  CHECK(co::event_of(l) == order_event{1, 2, 3});
  const foreign_record f{9, 42};
  CHECK(co::offset_of(f) == co::offset{9});
  CHECK(co::event_of(f) == 42);
}

// ---- keys (R8 as a concept) ----------------------------------------------------------------

struct line_item {
  long order_id;
  int event_seq;
  long cents;
};
using item_key = co::key<&line_item::order_id, &line_item::event_seq>;

static_assert(co::stateless_key<item_key, line_item>);
static_assert(
    co::stateless_key<decltype([](const line_item& e) { return e.order_id; }), line_item>);
static_assert(!co::stateless_key<decltype([n = 0](const line_item&) { return n; }), line_item>,
              "a key with state is consumer-derived");
static_assert(!co::stateless_key<decltype([] { return 4; }), line_item>,
              "a key that needs no event (a UUID, now()) is consumer-derived");
static_assert(!co::stateless_key<decltype([](auto&&...) { return 4; }), line_item>,
              "a key callable without the event is consumer-derived");
static_assert(!co::stateless_key<long (*)(const line_item&), line_item>,
              "a function pointer is state: which function is only known at run time");

TEST_CASE("key<> projects the event's members, in order") {
  const line_item e{4711, 3, 129900};
  CHECK(item_key{}(e) == std::tuple<long, int>{4711, 3});
  CHECK(test_support::order_key{}(order_event{92, 1, 5}) == std::tuple<std::int64_t>{92});
}
