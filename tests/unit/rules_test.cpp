// SPDX-License-Identifier: BSL-1.0
// The verdict of a configuration is a type: each rule is pinned here at build time, and the
// "can call" form (can_make_pipeline) and is_legal_v agree with it because they are the same
// predicate over the same parameters as `pipeline`. The compile-fail tests check the
// diagnostics the same rules produce.
#include <doctest/doctest.h>

#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include <commit_order/part_rules.hpp>

#include "support/orders.hpp"

namespace co = commit_order;
namespace r = commit_order::rules;
using namespace test_support;

// The verdict of pipeline<order_log, Sink, Policy, Options...>.
template <class Sink, class Policy, class... Options>
using verdict = co::verdict_t<order_log, Sink, Policy, Options...>;
template <class Store>
using with = co::with_store<Store>;

template <class... Caps>
using durable_table = order_table<Caps..., co::Synced>;

struct email_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::SideEffecting, co::Volatile>;
  void apply(co::offset, const order_event&) {}
};
using ledger_table = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Ledger>;

// ---- legal combinations --------------------------------------------------------------------
static_assert(std::is_same_v<verdict<guarded_tx_table, co::TransactionalPosition<>>, r::legal>);
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>, with<store>>, r::legal>);
static_assert(
    std::is_same_v<verdict<upsert_table, co::AtLeastOnce<co::EveryRecord>, with<store>>, r::legal>);
static_assert(std::is_same_v<verdict<append_table, co::AtMostOnce<>, with<store>>, r::legal>,
              "at-most-once into a plain table is legal: lossy by choice, never duplicated");
static_assert(
    std::is_same_v<verdict<upsert_table, co::AtMostOnce<co::AutoCommit>, with<store>>, r::legal>);
static_assert(std::is_same_v<verdict<ledger_table, co::TransactionalPosition<>>, r::legal>);
static_assert(
    std::is_same_v<verdict<order_table<co::DuplicatesHarmless>, co::AtLeastOnce<>, with<store>>,
                   r::legal>);

// ---- one violation per rule ----------------------------------------------------------------
static_assert(std::is_same_v<verdict<append_table, co::AtMostOnce<co::AutoCommit>, with<store>>,
                             r::auto_commit_needs_idempotent_sink>);  // R1
static_assert(std::is_same_v<verdict<upsert_table, co::AtLeastOnce<co::AutoCommit>, with<store>>,
                             r::auto_commit_makes_order_lossy>);  // R2
static_assert(std::is_same_v<
              verdict<guarded_tx_table, co::TransactionalPosition<co::AutoCommit>, with<store>>,
              r::auto_commit_makes_order_lossy>);  // R2
static_assert(std::is_same_v<verdict<append_table, co::AtLeastOnce<>, with<store>>,
                             r::replay_needs_idempotent_sink>);  // R3
static_assert(std::is_same_v<verdict<guarded_table, co::TransactionalPosition<>>,
                             r::position_needs_transactional_sink>);  // R4
static_assert(std::is_same_v<
              verdict<order_table<co::Idempotent, co::Transactional>, co::TransactionalPosition<>>,
              r::transactional_position_needs_offset_guard>);  // R5
static_assert(std::is_same_v<verdict<ledger_table, co::AtMostOnce<>, with<store>>,
                             r::ledger_must_not_lose>);  // R6
static_assert(std::is_same_v<verdict<email_sink, co::AtLeastOnce<>, with<store>>,
                             r::side_effects_need_outbox>);  // R7
static_assert(
    std::is_same_v<verdict<email_sink, co::AtMostOnce<>, with<store>>, r::side_effects_need_outbox>,
    "R7 holds under every policy, even the lossy one");
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>>,
                             r::position_store_missing>);  // R10

// ---- R9: the direction follows the step order ----------------------------------------------
// Write first (AtLeastOnce): the sink must be at least as durable as the store.
static_assert(std::is_same_v<co::verdict_t<synced_log, order_table<co::Idempotent>,
                                           co::AtLeastOnce<>, with<synced_store>>,
                             r::sink_less_durable_than_store>);  // R9a
static_assert(std::is_same_v<co::verdict_t<synced_log, durable_table<co::Idempotent>,
                                           co::AtLeastOnce<>, with<synced_store>>,
                             r::legal>);
static_assert(
    std::is_same_v<
        co::verdict_t<synced_log, durable_table<co::Idempotent>, co::AtLeastOnce<>, with<store>>,
        r::legal>,
    "a Synced sink with a Volatile store only replays after a power loss: harmless under R3");
// Position first (AtMostOnce): the store must be at least as durable as the sink.
static_assert(std::is_same_v<co::verdict_t<synced_log, durable_table<co::Idempotent>,
                                           co::AtMostOnce<>, with<store>>,
                             r::store_less_durable_than_sink>);  // R9b
static_assert(std::is_same_v<co::verdict_t<synced_log, order_table<co::Idempotent>,
                                           co::AtMostOnce<>, with<synced_store>>,
                             r::legal>);
// The source: it must not be less durable than the position stored for it.
static_assert(
    std::is_same_v<verdict<durable_table<co::Idempotent>, co::AtLeastOnce<>, with<synced_store>>,
                   r::source_less_durable_than_position>);  // R9c, store
static_assert(std::is_same_v<
              verdict<order_table<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Synced>,
                      co::TransactionalPosition<>>,
              r::source_less_durable_than_position>);  // R9c, position in sink
// A user source declares what it is; a broker outlives every consumer.
struct broker_source {
  using capabilities = co::capabilities<co::Replicated>;
  void seek(co::position) {}
  std::span<const co::logged<order_event>> poll(std::size_t) { return {}; }
  co::position earliest() const { return {}; }
  co::position end() const { return {}; }
};
static_assert(std::is_same_v<co::verdict_t<broker_source, durable_table<co::Idempotent>,
                                           co::AtLeastOnce<>, with<synced_store>>,
                             r::legal>);

// R8 judges the sink's key; a stateful one is rejected even on an otherwise perfect sink.
struct counter_key {
  int next = 0;
  int operator()(const order_event&) const { return next; }
};
using stateful_key_table =
    co::memory::table<order_event, counter_key, co::capabilities<co::Idempotent>>;
static_assert(std::is_same_v<verdict<stateful_key_table, co::AtLeastOnce<>, with<store>>,
                             r::key_must_derive_from_event>);

// ---- user-defined orders are judged by the same rules --------------------------------------
struct PositionTxThenWrite final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::Begin, co::StorePosition, co::Commit, co::Write>;
};
static_assert(std::is_same_v<verdict<ledger_table, PositionTxThenWrite>, r::ledger_must_not_lose>,
              "a hand-made order that can lose is kept away from a ledger");
struct WriteInTxThenCommitPosition final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::Begin, co::Write, co::Commit, co::CommitPosition>;
};
static_assert(std::is_same_v<
              verdict<order_table<co::Transactional>, WriteInTxThenCommitPosition, with<store>>,
              r::replay_needs_idempotent_sink>);
static_assert(std::is_same_v<verdict<upsert_table, WriteInTxThenCommitPosition, with<store>>,
                             r::position_needs_transactional_sink>);
struct NoWrite final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::CommitPosition>;
};
static_assert(std::is_same_v<verdict<upsert_table, NoWrite, with<store>>, r::malformed_step_order>);

// ---- shape checks come first ---------------------------------------------------------------
static_assert(std::is_same_v<verdict<upsert_table, int, with<store>>, r::not_a_policy>);
static_assert(std::is_same_v<verdict<upsert_table, co::AtLeastOnce<co::Idempotent>, with<store>>,
                             r::not_a_trigger>,
              "a capability given where a trigger belongs is named as such");
static_assert(std::is_same_v<co::verdict_t<int, upsert_table, co::AtLeastOnce<>, with<store>>,
                             r::not_a_source>);
static_assert(std::is_same_v<verdict<int, co::AtLeastOnce<>, with<store>>, r::not_a_sink>);
static_assert(
    std::is_same_v<verdict<upsert_table, co::AtLeastOnce<>, with<int>>, r::not_a_position_store>);
struct undeclared_sink {
  using row_type = order_event;
  void apply(co::offset, const order_event&) {}
};
static_assert(std::is_same_v<verdict<undeclared_sink, co::AtMostOnce<>, with<store>>,
                             r::undeclared_capabilities>);
struct sink_without_durability {
  using row_type = order_event;
  using capabilities = co::capabilities<co::DuplicatesHarmless>;
  void apply(co::offset, const order_event&) {}
};
static_assert(std::is_same_v<verdict<sink_without_durability, co::AtMostOnce<>, with<store>>,
                             r::sink_durability_undeclared>,
              "durability is declared, never assumed");
struct store_without_durability {
  std::optional<co::position> load() const { return {}; }
  void commit(co::position) {}
};
static_assert(
    std::is_same_v<verdict<append_table, co::AtMostOnce<>, with<store_without_durability>>,
                   r::store_durability_undeclared>);
struct source_without_durability {
  void seek(co::position) {}
  std::span<const co::logged<order_event>> poll(std::size_t) { return {}; }
  co::position earliest() const { return {}; }
  co::position end() const { return {}; }
};
static_assert(std::is_same_v<
              co::verdict_t<source_without_durability, append_table, co::AtMostOnce<>, with<store>>,
              r::source_durability_undeclared>);
struct mutable_row_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::DuplicatesHarmless, co::Volatile>;
  void apply(co::offset, order_event&) {}
};
static_assert(std::is_same_v<verdict<mutable_row_sink, co::AtMostOnce<>, with<store>>,
                             r::apply_takes_mutable_row>);
struct keyless_idempotent_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::Idempotent, co::Volatile>;
  void apply(co::offset, const order_event&) {}
};
static_assert(std::is_same_v<verdict<keyless_idempotent_sink, co::AtLeastOnce<>, with<store>>,
                             r::keyless_idempotency>);
struct claims_tx_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Volatile>;
  void apply(co::offset, const order_event&) {}
};
static_assert(
    std::is_same_v<verdict<claims_tx_sink, co::TransactionalPosition<>>, r::transactional_shape>);
struct tx_without_position : claims_tx_sink {
  void begin() {}
  void commit() {}
  void rollback() {}
};
static_assert(std::is_same_v<verdict<tx_without_position, co::TransactionalPosition<>>,
                             r::transactional_position_shape>);
struct tx_wrong_position_type : tx_without_position {
  void store_position(co::position) {}
  co::position load_position() const { return {}; }
};
static_assert(std::is_same_v<verdict<tx_wrong_position_type, co::TransactionalPosition<>>,
                             r::load_position_type>);
struct other_event {
  int x;
};
static_assert(std::is_same_v<verdict<co::memory::table<other_event, co::no_key, co::capabilities<>>,
                                     co::AtMostOnce<>, with<store>>,
                             r::row_mismatch>);

// ---- every option is used by the configuration it is given to, and has the right shape ------
static_assert(std::is_same_v<verdict<guarded_tx_table, co::TransactionalPosition<>, with<store>>,
                             r::unused_store>);
static_assert(std::is_same_v<
              verdict<guarded_table, co::AtLeastOnce<>, with<store>, co::with_clock<manual_clock>>,
              r::unused_clock>);
static_assert(std::is_same_v<verdict<upsert_table, co::AtMostOnce<co::AutoCommit>, with<store>,
                                     co::with_clock<manual_clock>>,
                             r::legal>);
struct clock_without_now {
  using time_point = int;
};
static_assert(std::is_same_v<verdict<upsert_table, co::AtMostOnce<co::AutoCommit>, with<store>,
                                     co::with_clock<clock_without_now>>,
                             r::bad_clock>);
struct mutable_point_faults {
  void at(co::fault_point&) {}
};
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>, with<store>,
                                     co::with_faults<mutable_point_faults>>,
                             r::bad_fault_injector>);
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>, with<store>,
                                     co::with_faults<co::crash_at_nth>>,
                             r::legal>);
struct wrong_hook_observer {
  void on(co::events::row_written, int) {}  // an offset is not an int
};
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>, with<store>,
                                     co::with_observer<wrong_hook_observer>>,
                             r::observer_hook_mismatch>);
struct catch_all_observer {
  template <class Event, class... Args>
  void on(Event, const Args&...) {}
};
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>, with<store>,
                                     co::with_observer<catch_all_observer>>,
                             r::legal>);

// ---- one predicate: the "can call" form and is_legal_v agree with pipeline ------------------
static_assert(co::can_make_pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>>);
static_assert(co::can_make_pipeline<order_log, guarded_table, co::AtLeastOnce<>, with<store>>);
static_assert(!co::can_make_pipeline<order_log, append_table, co::AtLeastOnce<>, with<store>>);
static_assert(!co::can_make_pipeline<order_log, guarded_table, co::AtLeastOnce<>>);
static_assert(!co::can_make_pipeline<order_log, guarded_table, co::AtLeastOnce<>, int>,
              "an unknown option is not silently ignored");
static_assert(co::is_legal_v<order_log, guarded_tx_table, co::TransactionalPosition<>>);
// R16 depends on the error handling: the same parts are legal with stop and not with retry.
static_assert(co::is_legal_v<order_log, append_table, co::AtMostOnce<>, with<store>>);
static_assert(!co::is_legal_v<order_log, append_table, co::AtMostOnce<>, with<store>,
                              co::with_error_handling<co::retry<2>>>);
static_assert(!co::can_make_pipeline<order_log, append_table, co::AtMostOnce<>, with<store>,
                                     co::with_error_handling<co::retry<2>>>);

namespace {
template <class... Rules>
std::set<std::string_view> ids(r::rule_list<Rules...>) {
  return {Rules::id...};
}
template <class... Rules>
bool every_message_names_its_rule(r::rule_list<Rules...>) {
  return ((std::string_view{Rules::message}.starts_with("commit_order " + std::string(Rules::id) +
                                                        ": ") &&
           std::string_view{Rules::message}.find(" -- ") != std::string_view::npos) &&
          ...);
}
template <class... Rules>
bool messages_are_one_line(r::rule_list<Rules...>) {
  return ((std::string_view{Rules::message}.find('\n') == std::string_view::npos) && ...);
}
}  // namespace

TEST_CASE("every rule has a distinct id and a one-line message that names it and the fix") {
  CHECK(ids(r::all_rules{}).size() == r::all_rules::size);
  CHECK(every_message_names_its_rule(r::all_rules{}));
  CHECK(messages_are_one_line(r::all_rules{}));
}

namespace {
namespace pr = commit_order::part_rules;
template <class... Rules>
std::set<std::string_view> part_ids(pr::rule_list<Rules...>) {
  return {Rules::id...};
}
template <class... Rules>
bool every_part_message_names_its_rule(pr::rule_list<Rules...>) {
  return ((std::string_view{Rules::message}.starts_with("commit_order " + std::string(Rules::id) +
                                                        ": ") &&
           std::string_view{Rules::message}.find(" -- ") != std::string_view::npos &&
           std::string_view{Rules::message}.find('\n') == std::string_view::npos) &&
          ...);
}
// An id is its family's prefix and a number: CO, MM, FL, SQ, PG, KF or JS.
template <class... Rules>
bool every_part_id_names_its_family(pr::rule_list<Rules...>) {
  constexpr std::string_view families[] = {"CO", "MM", "FL", "SQ", "PG", "KF", "JS"};
  auto named = [&](std::string_view id) {
    bool family = false;
    for (std::string_view f : families)
      family = family || id.starts_with(f);
    return family && id.size() > 2 && id.substr(2).find_first_not_of("0123456789") == id.npos;
  };
  return (named(Rules::id) && ...);
}
}  // namespace

TEST_CASE("every part rule has a distinct id of its family and a one-line message with the fix") {
  const auto parts = part_ids(pr::all_part_rules{});
  CHECK(parts.size() == pr::all_part_rules::size);
  CHECK(every_part_message_names_its_rule(pr::all_part_rules{}));
  CHECK(every_part_id_names_its_family(pr::all_part_rules{}));
  for (std::string_view id : ids(r::all_rules{}))
    CHECK_MESSAGE(parts.count(id) == 0, "a part rule shares the id of a pipeline rule: " << id);
}

// S28: a sink derived from an adapter's sink keeps what the adapter implements and adds only
// what makes the rules stricter. `adapter_sink` stands for an adapter's sink (the SQL ones name
// `implemented_capabilities` the same way).
struct adapter_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities =
      co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Buffered>;
  using implemented_capabilities = capabilities;
  co::write_outcome apply(co::offset, const order_event&) { return co::write_outcome::applied; }
  void begin() {}
  void commit() {}
  void rollback() noexcept {}
  void store_position(co::position) {}
  std::optional<co::position> load_position() const { return std::nullopt; }
};
template <class... Caps>
struct restating_sink : adapter_sink {
  using capabilities = co::capabilities<Caps...>;
};
using buffered_log = co::memory::log<order_event, co::Buffered>;
template <class Sink>
using restated_verdict = co::verdict_t<buffered_log, Sink, co::TransactionalPosition<>>;
static_assert(std::is_same_v<restated_verdict<adapter_sink>, r::legal>);
static_assert(
    std::is_same_v<restated_verdict<restating_sink<co::Idempotent, co::OffsetGuarded,
                                                   co::Transactional, co::Buffered, co::Ledger>>,
                   r::legal>);
static_assert(std::is_same_v<
              restated_verdict<restating_sink<co::Idempotent, co::OffsetGuarded, co::Transactional,
                                              co::Buffered, co::MaxTransactionRows<100>>>,
              r::legal>);
// Another durability (higher: a lie; lower: it would hide R9b), a guarantee the code does not
// give, or one it does give left out: S28.
static_assert(
    std::is_same_v<restated_verdict<restating_sink<co::Idempotent, co::OffsetGuarded,
                                                   co::Transactional, co::Synced, co::Ledger>>,
                   r::restated_capabilities>);
static_assert(
    std::is_same_v<restated_verdict<restating_sink<co::Idempotent, co::OffsetGuarded,
                                                   co::Transactional, co::Buffered, co::Synced>>,
                   r::restated_capabilities>);
static_assert(std::is_same_v<restated_verdict<restating_sink<co::Idempotent, co::OffsetGuarded,
                                                             co::Transactional, co::Volatile>>,
                             r::restated_capabilities>);
static_assert(std::is_same_v<
              restated_verdict<restating_sink<co::Idempotent, co::OffsetGuarded, co::Transactional,
                                              co::Buffered, co::Concurrent>>,
              r::restated_capabilities>);
static_assert(std::is_same_v<
              restated_verdict<restating_sink<co::Idempotent, co::Transactional, co::Buffered>>,
              r::restated_capabilities>);
// A wrapper forwards what the adapter implements with what it declares.
static_assert(
    !co::restates_truthfully_v<co::memory::forwarding_sink<
        restating_sink<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Synced>&>>);

// R1 is judged on the executed order, not on the trigger's name: a hand-made order whose
// position moves on a timer is held to the same rule as AtMostOnce<AutoCommit>.
struct TimerByHand final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::Write, co::TimedCommitPosition>;
};
static_assert(std::is_same_v<verdict<order_table<co::DuplicatesHarmless>, TimerByHand, with<store>>,
                             r::auto_commit_needs_idempotent_sink>);
static_assert(std::is_same_v<co::guarantee_t<TimerByHand>, co::MayLoseAndDuplicate>);

// R16: retrying outside a transaction needs a sink that absorbs a second application; inside
// a transaction (the policy's, or the one every write step opens on a Transactional sink) the
// retry re-runs a rolled-back unit, and is safe on any transactional sink.
static_assert(std::is_same_v<verdict<append_table, co::AtMostOnce<>, with<store>,
                                     co::with_error_handling<co::retry<2>>>,
                             r::retry_needs_idempotent_sink>);
static_assert(std::is_same_v<verdict<upsert_table, co::AtMostOnce<>, with<store>,
                                     co::with_error_handling<co::retry<2>>>,
                             r::legal>);
static_assert(std::is_same_v<verdict<guarded_tx_table, co::TransactionalPosition<>,
                                     co::with_error_handling<co::retry<2>>>,
                             r::legal>);
static_assert(std::is_same_v<verdict<order_table<co::Transactional>, co::AtMostOnce<>, with<store>,
                                     co::with_error_handling<co::retry<2>>>,
                             r::legal>);
