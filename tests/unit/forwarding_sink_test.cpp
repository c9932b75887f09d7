// SPDX-License-Identifier: BSL-1.0
// memory::forwarding_sink: a wrapper is, to the rules and to the loop, exactly the sink it wraps
// — the same concepts, capabilities, key and verdicts, and every call forwarded (through its
// guard) — and memory::synchronized keeps a Transactional sink transactional.
#include <doctest/doctest.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <commit_order/adapters/memory/manual_executor.hpp>
#include <commit_order/adapters/memory/synchronized.hpp>

#include "support/orders.hpp"

namespace co = commit_order;
using namespace test_support;

namespace {

template <class Inner>
using wrapped = co::memory::forwarding_sink<Inner>;

// ---- sinks of every shape the rules tell apart ----------------------------------------------

/// Only apply and capabilities: no key, no transactions, no watermark.
struct bare_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::DuplicatesHarmless, co::Synced>;
  void apply(co::offset, const order_event&) {}
};
/// No capabilities at all (rule S6).
struct undeclared_sink {
  using row_type = order_event;
  void apply(co::offset, const order_event&) {}
};
/// apply takes a mutable row (rule S14).
struct mutable_row_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::Volatile>;
  void apply(co::offset, order_event&) {}
};
/// Claims Transactional without begin/commit/rollback (rule S7).
struct half_transactional_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Volatile>;
  void apply(co::offset, const order_event&) {}
  void store_position(co::position) {}
  std::optional<co::position> load_position() const { return std::nullopt; }
};
/// load_position returns a sentinel instead of an optional (rule S17).
struct sentinel_position_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Volatile>;
  void apply(co::offset, const order_event&) {}
  void begin() {}
  void commit() {}
  void rollback() {}
  void store_position(co::position) {}
  co::position load_position() const { return co::position{0}; }
};

/// Binds its positions to the source that feeds it (the SQL sinks' bind_source).
struct bound_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::Volatile>;
  std::string bound;
  void apply(co::offset, const order_event&) {}
  void bind_source(const std::string& identity) { bound = identity; }
};

template <class Sink, class Policy>
using verdict_for =
    std::conditional_t<co::policy_facts_v<Policy>.uses_position_store,
                       co::verdict_t<order_log, Sink, Policy, co::with_store<volatile_store>>,
                       co::verdict_t<order_log, Sink, Policy>>;

template <class S>
struct capabilities_or_none {
  using type = void;
};
template <class S>
requires co::declares_capabilities<S>
struct capabilities_or_none<S> {
  using type = co::capabilities_of_t<S>;
};

/// W looks exactly like S: to every concept the loop uses, to the capability and key traits,
/// and to the verdict of every policy.
template <class W, class S>
constexpr bool same_to_the_rules =
    co::sink<W> == co::sink<S>&& co::transactional_sink<W> ==
    co::transactional_sink<S>&& co::fencing_sink<W> ==
    co::fencing_sink<S>&& co::watermarked_sink<W> ==
    co::watermarked_sink<S>&& co::runtime_limited_sink<W> ==
    co::runtime_limited_sink<S>&& co::source_bound_sink<W> ==
    co::source_bound_sink<S>&& co::declares_capabilities<W> ==
    co::declares_capabilities<S>&& std::is_same_v<typename capabilities_or_none<W>::type,
                                                  typename capabilities_or_none<S>::type>&&
        std::is_same_v<co::sink_key_t<W>, co::sink_key_t<S>>&& std::is_same_v<
            verdict_for<W, co::AtMostOnce<>>, verdict_for<S, co::AtMostOnce<>>>&&
            std::is_same_v<verdict_for<W, co::AtLeastOnce<>>, verdict_for<S, co::AtLeastOnce<>>>&&
                std::is_same_v<verdict_for<W, co::TransactionalPosition<>>,
                               verdict_for<S, co::TransactionalPosition<>>>;

template <class S>
constexpr bool forwarded_either_way =
    same_to_the_rules<wrapped<S>, S>&& same_to_the_rules<wrapped<S&>, S>;

static_assert(forwarded_either_way<append_table>);
static_assert(forwarded_either_way<upsert_table>);
static_assert(forwarded_either_way<guarded_table>);
static_assert(forwarded_either_way<guarded_tx_table>);
static_assert(forwarded_either_way<bare_sink>);
static_assert(forwarded_either_way<undeclared_sink>);
static_assert(forwarded_either_way<mutable_row_sink>);
static_assert(forwarded_either_way<half_transactional_sink>);
static_assert(forwarded_either_way<sentinel_position_sink>);
static_assert(forwarded_either_way<bound_sink>);

// The mistakes are the wrapped sink's, and the rules name them as such.
static_assert(std::is_same_v<verdict_for<wrapped<undeclared_sink>, co::AtLeastOnce<>>,
                             co::rules::undeclared_capabilities>);
static_assert(std::is_same_v<verdict_for<wrapped<mutable_row_sink>, co::AtMostOnce<>>,
                             co::rules::apply_takes_mutable_row>);
static_assert(std::is_same_v<verdict_for<wrapped<half_transactional_sink>, co::AtLeastOnce<>>,
                             co::rules::transactional_shape>);
static_assert(
    std::is_same_v<verdict_for<wrapped<sentinel_position_sink>, co::TransactionalPosition<>>,
                   co::rules::load_position_type>);
// Nothing the wrapped sink lacks is declared.
static_assert(!co::transactional_sink<wrapped<guarded_table&>>);
template <class T>
concept names_a_key = requires {
  typename T::key_type;
};
template <class T>
concept names_capabilities = requires {
  typename T::capabilities;
};
static_assert(!names_a_key<wrapped<bare_sink&>> && names_a_key<wrapped<guarded_table&>>);
static_assert(!names_capabilities<wrapped<undeclared_sink>>);

/// A sink that needs constructor arguments, to be owned by its wrapper.
struct configured_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::Volatile>;
  configured_sink(int s, const char* n) : scale(s), name(n) {}
  int scale;
  const char* name;
  std::size_t rows = 0;
  void apply(co::offset, const order_event&) { ++rows; }
};

// ---- a guard around every forwarded call ----------------------------------------------------

std::size_t guarded_calls = 0;
struct global_counting_guard {
  template <class F>
  decltype(auto) operator()(F&& call) const {
    ++guarded_calls;
    return call();
  }
};

/// A wrapper that changes one member and counts: the usual way to use the helper.
struct counting_sink : co::memory::forwarding_sink<guarded_tx_table&> {
  using co::memory::forwarding_sink<guarded_tx_table&>::forwarding_sink;
  std::size_t writes = 0;
  co::write_outcome apply(co::offset o, const order_event& e) {
    ++writes;
    return inner().apply(co::partition_id{0}, o, e);
  }
};

}  // namespace

TEST_CASE("forwarding_sink: every call reaches the wrapped sink, through the guard") {
  guarded_tx_table table;
  guarded_calls = 0;
  co::memory::forwarding_sink<guarded_tx_table&, global_counting_guard> w(table);
  w.begin();
  CHECK_FALSE(w.claim(co::partition_id{0}, co::epoch{3}).has_value());
  CHECK(w.apply(co::partition_id{0}, co::offset{0}, order_event{1, 2, 3}) ==
        co::write_outcome::applied);
  CHECK(w.apply(co::partition_id{0}, co::offset{0}, order_event{1, 2, 4}) ==
        co::write_outcome::absorbed);
  w.store_position(co::partition_id{0}, co::position{1}, co::epoch{3});
  w.commit();
  CHECK(table.owner() == co::epoch{3});
  w.begin();
  w.apply(co::partition_id{0}, co::offset{1}, order_event{2, 2, 3});
  w.store_position(co::partition_id{0}, co::position{2});
  w.rollback();
  CHECK(w.load_position() == co::position{1});
  const auto& cw = w;
  CHECK(cw.load_position() == co::position{1});
  CHECK(cw.applied_watermark() == co::offset{0});
  table.set_max_transaction_rows(7);
  CHECK(cw.max_transaction_rows() == 7);
  CHECK(guarded_calls == 14);  // each of the fourteen calls above, once
  CHECK(table.size() == 1);
  CHECK(table.find({1})->row.total_cents == 3);
}

TEST_CASE("forwarding_sink: the source's identity reaches the wrapped sink") {
  // Dropped, the wrapped sink's position rows would be bound to its table only, and two
  // sources feeding one table under one stream would share a position.
  bound_sink inner;
  wrapped<bound_sink&> w(inner);
  w.bind_source("kafka topic 'orders'");
  CHECK(inner.bound == "kafka topic 'orders'");
  co::memory::synchronized<bound_sink> locked;
  locked.bind_source("kafka topic 'refunds'");
  CHECK(locked.inner().bound == "kafka topic 'refunds'");
}

TEST_CASE("forwarding_sink: an owned sink is built from the constructor's arguments") {
  co::memory::forwarding_sink<configured_sink> w(3, "orders");
  static_assert(std::is_same_v<decltype(w.inner()), configured_sink&>);
  CHECK(w.inner().scale == 3);
  CHECK(w.inner().name == std::string_view("orders"));
  w.apply(co::offset{0}, order_event{});
  w.apply(co::offset{1}, order_event{});
  CHECK(w.inner().rows == 2);
}

TEST_CASE("forwarding_sink: a derived wrapper runs under every policy it is judged fit for") {
  order_log log = make_log(10, 3);
  guarded_tx_table table;
  counting_sink sink(table);
  // A wrapper that lost claim() could not fence: the constructor would refuse the owner epoch.
  co::pipeline<order_log, counting_sink, co::TransactionalPosition<>> p(
      log, sink, co::settings{.batch_size = 4, .owner_epoch = co::epoch{5}});
  CHECK(p.run() == 10);
  CHECK(sink.writes == 10);
  CHECK(table.size() == 3);
  CHECK(table.load_position() == co::position{10});
  CHECK(table.owner() == co::epoch{5});
  // The wrapped sink's watermark reaches progress().
  CHECK(p.progress().applied_watermark == co::offset{9});
}

TEST_CASE("synchronized keeps a Transactional sink transactional") {
  using sync_tx = co::memory::synchronized<guarded_tx_table>;
  // It forwards begin/commit/rollback and the position calls, under its mutex; before, it passed
  // on the Transactional tag without them and rule S7 blamed its user.
  static_assert(co::partitioned_transactional_sink<sync_tx>);
  static_assert(co::partitioned_fencing_sink<sync_tx>);
  static_assert(co::has_capability_v<sync_tx, co::Concurrent>);
  static_assert(co::has_capability_v<sync_tx, co::Transactional>);
  // With an executor the refusal names the real reason: a transaction cannot span threads.
  static_assert(std::is_same_v<co::verdict_t<order_log, sync_tx, co::TransactionalPosition<>,
                                             co::with_executor<co::memory::manual_executor>>,
                               co::rules::executor_splits_transaction>);
  static_assert(
      co::can_make_pipeline<order_log, sync_tx, co::AtLeastOnce<>, co::with_store<volatile_store>,
                            co::with_executor<co::memory::manual_executor>>);

  order_log log = make_log(9, 4);
  sync_tx sink;
  co::pipeline<order_log, sync_tx, co::TransactionalPosition<>> p(log, sink,
                                                                  co::settings{.batch_size = 4});
  CHECK(p.run() == 9);
  CHECK(sink.inner().size() == 4);
  CHECK(sink.inner().load_position() == co::position{9});
}
