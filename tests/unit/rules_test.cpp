// The verdict of a combination is a type: each rule is pinned here at build time, and the
// "can call" form (can_make_pipeline) agrees with it. The compile-fail tests check the
// diagnostics the same rules produce.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <string_view>
#include <type_traits>

#include "support/orders.hpp"

namespace co = commit_order;
namespace r = commit_order::rules;
using namespace test_support;

template <class Sink, class Policy, class Store = co::no_position_store>
using verdict = co::verdict_t<order_log, Sink, Policy, Store>;

template <class... Caps>
using durable_table = order_table<Caps..., co::Synced>;
using synced_store = co::memory::position_store<co::Synced>;

struct email_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::SideEffecting>;
  void apply(co::offset, const order_event&) {}
};
struct ledger_table_tag {};
using ledger_table = order_table<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Ledger>;

// ---- legal combinations --------------------------------------------------------------------
static_assert(std::is_same_v<verdict<guarded_tx_table, co::TransactionalPosition<>>, r::legal>);
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>, store>, r::legal>);
static_assert(
    std::is_same_v<verdict<upsert_table, co::AtLeastOnce<co::EveryRecord>, store>, r::legal>);
static_assert(std::is_same_v<verdict<append_table, co::AtMostOnce<>, store>, r::legal>,
              "at-most-once into a plain table is legal: lossy by choice, never duplicated");
static_assert(
    std::is_same_v<verdict<upsert_table, co::AtMostOnce<co::AutoCommit>, store>, r::legal>);
static_assert(std::is_same_v<verdict<ledger_table, co::TransactionalPosition<>>, r::legal>);
static_assert(std::is_same_v<verdict<order_table<co::DuplicatesHarmless>, co::AtLeastOnce<>, store>,
                             r::legal>);

// ---- one violation per rule ----------------------------------------------------------------
static_assert(std::is_same_v<verdict<append_table, co::AtMostOnce<co::AutoCommit>, store>,
                             r::auto_commit_needs_idempotent_sink>);  // R1
static_assert(std::is_same_v<verdict<upsert_table, co::AtLeastOnce<co::AutoCommit>, store>,
                             r::auto_commit_makes_order_lossy>);  // R2
static_assert(
    std::is_same_v<verdict<guarded_tx_table, co::TransactionalPosition<co::AutoCommit>, store>,
                   r::auto_commit_makes_order_lossy>);  // R2
static_assert(std::is_same_v<verdict<append_table, co::AtLeastOnce<>, store>,
                             r::replay_needs_idempotent_sink>);  // R3
static_assert(std::is_same_v<verdict<guarded_table, co::TransactionalPosition<>>,
                             r::position_needs_transactional_sink>);  // R4
static_assert(std::is_same_v<
              verdict<order_table<co::Idempotent, co::Transactional>, co::TransactionalPosition<>>,
              r::transactional_position_needs_offset_guard>);  // R5
static_assert(std::is_same_v<verdict<ledger_table, co::AtMostOnce<>, store>,
                             r::ledger_must_not_lose>);  // R6
static_assert(std::is_same_v<verdict<email_sink, co::AtLeastOnce<>, store>,
                             r::side_effects_need_outbox>);  // R7
static_assert(
    std::is_same_v<verdict<email_sink, co::AtMostOnce<>, store>, r::side_effects_need_outbox>,
    "R7 holds under every policy, even the lossy one");
static_assert(std::is_same_v<verdict<durable_table<co::Idempotent>, co::AtLeastOnce<>, store>,
                             r::store_less_durable_than_sink>);  // R9
static_assert(std::is_same_v<
              verdict<durable_table<co::Idempotent>, co::AtLeastOnce<>, synced_store>, r::legal>);
static_assert(std::is_same_v<verdict<guarded_table, co::AtLeastOnce<>>,
                             r::position_store_missing>);  // R10

// R8 judges the sink's key; a stateful one is rejected even on an otherwise perfect sink.
struct counter_key {
  int next = 0;
  int operator()(const order_event&) const { return next; }
};
using stateful_key_table =
    co::memory::table<order_event, counter_key, co::capabilities<co::Idempotent>>;
static_assert(std::is_same_v<verdict<stateful_key_table, co::AtLeastOnce<>, store>,
                             r::key_must_derive_from_event>);
// The key slot can also be judged on its own.
static_assert(std::is_same_v<co::verdict_t<order_log, guarded_table, co::AtLeastOnce<>, store,
                                           decltype([] { return 1; })>,
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
static_assert(
    std::is_same_v<verdict<order_table<co::Transactional>, WriteInTxThenCommitPosition, store>,
                   r::replay_needs_idempotent_sink>);
static_assert(std::is_same_v<verdict<upsert_table, WriteInTxThenCommitPosition, store>,
                             r::position_needs_transactional_sink>);
struct NoWrite final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::CommitPosition>;
};
static_assert(std::is_same_v<verdict<upsert_table, NoWrite, store>, r::malformed_step_order>);

// ---- shape checks come first ---------------------------------------------------------------
static_assert(std::is_same_v<verdict<upsert_table, int, store>, r::not_a_policy>);
static_assert(
    std::is_same_v<co::verdict_t<int, upsert_table, co::AtLeastOnce<>, store>, r::not_a_source>);
static_assert(std::is_same_v<verdict<int, co::AtLeastOnce<>, store>, r::not_a_sink>);
static_assert(
    std::is_same_v<verdict<upsert_table, co::AtLeastOnce<>, int>, r::not_a_position_store>);
struct undeclared_sink {
  using row_type = order_event;
  void apply(co::offset, const order_event&) {}
};
static_assert(
    std::is_same_v<verdict<undeclared_sink, co::AtMostOnce<>, store>, r::undeclared_capabilities>);
struct claims_tx_sink {
  using row_type = order_event;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>;
  void apply(co::offset, const order_event&) {}
};
static_assert(
    std::is_same_v<verdict<claims_tx_sink, co::TransactionalPosition<>>, r::transactional_shape>);
struct other_event {
  int x;
};
static_assert(std::is_same_v<verdict<co::memory::table<other_event, co::no_key, co::capabilities<>>,
                                     co::AtMostOnce<>, store>,
                             r::row_mismatch>);

// ---- the "can call" form agrees ------------------------------------------------------------
static_assert(co::can_make_pipeline<order_log, guarded_tx_table, co::TransactionalPosition<>>);
static_assert(
    co::can_make_pipeline<order_log, guarded_table, co::AtLeastOnce<>, co::with_store<store>>);
static_assert(
    !co::can_make_pipeline<order_log, append_table, co::AtLeastOnce<>, co::with_store<store>>);
static_assert(!co::can_make_pipeline<order_log, guarded_table, co::AtLeastOnce<>>);
static_assert(!co::can_make_pipeline<order_log, guarded_table, co::AtLeastOnce<>, int>,
              "an unknown option is not silently ignored");
static_assert(co::is_legal_v<order_log, guarded_tx_table, co::TransactionalPosition<>>);

namespace {
template <class... Rules>
std::set<std::string_view> ids(r::rule_list<Rules...>) {
  return {Rules::id...};
}
template <class... Rules>
bool every_message_names_its_rule(r::rule_list<Rules...>) {
  return ((std::string_view{Rules::message}.starts_with("commit_order") &&
           std::string_view{Rules::message}.find(" -- ") != std::string_view::npos) &&
          ...);
}
template <class... Rules>
bool messages_are_one_line(r::rule_list<Rules...>) {
  return ((std::string_view{Rules::message}.find('\n') == std::string_view::npos) && ...);
}
}  // namespace

TEST_CASE("every rule has a distinct id and a one-line message with a fix") {
  CHECK(ids(r::all_rules{}).size() == 29);
  CHECK(every_message_names_its_rule(r::all_rules{}));
  CHECK(messages_are_one_line(r::all_rules{}));
  CHECK(
      std::string_view{r::replay_needs_idempotent_sink::message}.starts_with("commit_order R3: "));
}

// R1 is judged on the executed order, not on the trigger's name: a hand-made order whose
// position moves on a timer is held to the same rule as AtMostOnce<AutoCommit>.
struct TimerByHand final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::Write, co::TimedCommitPosition>;
};
static_assert(std::is_same_v<verdict<order_table<co::DuplicatesHarmless>, TimerByHand, store>,
                             r::auto_commit_needs_idempotent_sink>);
static_assert(std::is_same_v<co::guarantee_t<TimerByHand>, co::MayLoseAndDuplicate>);

// R16: retrying outside a transaction needs a sink that absorbs a second application; inside
// a transaction the retry re-runs a rolled-back unit, and is safe on any transactional sink.
static_assert(std::is_same_v<
              co::verdict_of_t<co::combination<order_log, append_table, co::AtMostOnce<>, store,
                                               co::no_key, co::identity_transform, co::retry<2>>>,
              r::retry_needs_idempotent_sink>);
static_assert(std::is_same_v<
              co::verdict_of_t<co::combination<order_log, upsert_table, co::AtMostOnce<>, store,
                                               order_key, co::identity_transform, co::retry<2>>>,
              r::legal>);
static_assert(
    std::is_same_v<co::verdict_of_t<co::combination<
                       order_log, guarded_tx_table, co::TransactionalPosition<>,
                       co::no_position_store, order_key, co::identity_transform, co::retry<2>>>,
                   r::legal>);
