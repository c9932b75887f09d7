// SPDX-License-Identifier: BSL-1.0
// The guarantee is computed from the order of the steps, never declared. These checks show the
// derivation for the three policies, for AutoCommit, and for orders a user writes.
#include <doctest/doctest.h>

#include <string_view>
#include <type_traits>

#include <commit_order/policy.hpp>

namespace co = commit_order;

template <class P, class G>
constexpr bool gives = std::is_same_v<co::guarantee_t<P>, G>;

// ---- the three policies, every trigger -----------------------------------------------------

static_assert(gives<co::AtMostOnce<>, co::MayLose>);
static_assert(gives<co::AtMostOnce<co::EveryRecord>, co::MayLose>);
static_assert(gives<co::AtLeastOnce<>, co::MayDuplicate>);
static_assert(gives<co::AtLeastOnce<co::EveryRecord>, co::MayDuplicate>);
static_assert(gives<co::TransactionalPosition<>, co::ExactlyOnceInSink>);
static_assert(gives<co::TransactionalPosition<co::EveryRecord>, co::ExactlyOnceInSink>);

// ---- AutoCommit: the timer takes over the position step, whatever the order claimed --------

static_assert(gives<co::AtMostOnce<co::AutoCommit>, co::MayLoseAndDuplicate>);
static_assert(gives<co::AtLeastOnce<co::AutoCommit>, co::MayLoseAndDuplicate>);
static_assert(gives<co::TransactionalPosition<co::AutoCommit>, co::MayLoseAndDuplicate>);
static_assert(
    std::is_same_v<co::claimed_guarantee_t<co::AtLeastOnce<co::AutoCommit>>, co::MayDuplicate>,
    "the claim is the order's; the trigger is what breaks it (rule R2)");
static_assert(std::is_same_v<co::effective_steps_t<co::AtLeastOnce<co::AutoCommit>>,
                             co::step_list<co::Poll, co::Write, co::TimedCommitPosition>>);
static_assert(std::is_same_v<
              co::effective_steps_t<co::TransactionalPosition<co::AutoCommit>>,
              co::step_list<co::Poll, co::Begin, co::Write, co::TimedCommitPosition, co::Commit>>);

// ---- orders a user writes ------------------------------------------------------------------

/// The data in a transaction, the position in a separate store after it: two durable writes,
/// the second being the position — replays, never loses.
struct WriteInTxThenCommitPosition final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::Begin, co::Write, co::Commit, co::CommitPosition>;
};
static_assert(gives<WriteInTxThenCommitPosition, co::MayDuplicate>);

/// The junior engineer's change: the position stored in a transaction that commits before
/// the write. "It prevents duplicates" — by losing records.
struct PositionTxThenWrite final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::Begin, co::StorePosition, co::Commit, co::Write>;
};
static_assert(gives<PositionTxThenWrite, co::MayLose>);

/// Write outside, position inside a later transaction: still write-then-commit.
struct WriteThenPositionTx final {
  using trigger = co::EveryRecord;
  using steps = co::step_list<co::Poll, co::Write, co::Begin, co::StorePosition, co::Commit>;
};
static_assert(gives<WriteThenPositionTx, co::MayDuplicate>);

/// A position store commit placed *inside* the sink transaction is still a separate system:
/// it is durable before the sink's Commit, so a crash in between loses.
struct StoreCommitInsideTx final {
  using trigger = co::EveryBatch;
  using steps = co::step_list<co::Poll, co::Begin, co::Write, co::CommitPosition, co::Commit>;
};
static_assert(gives<StoreCommitInsideTx, co::MayLose>);

// ---- malformed orders are not judged: they give no guarantee and R0 rejects them ------------

template <class... S>
constexpr co::step_order_facts facts = co::facts_of_v<co::step_list<S...>>;

static_assert(!facts<co::Write, co::Poll, co::CommitPosition>.well_formed);
static_assert(!facts<co::Poll, co::CommitPosition>.well_formed);
static_assert(!facts<co::Poll, co::Write>.well_formed);
static_assert(!facts<co::Poll, co::Write, co::Write, co::CommitPosition>.well_formed);
static_assert(!facts<co::Poll, co::Write, co::StorePosition>.well_formed);
static_assert(!facts<co::Poll, co::Begin, co::Write, co::StorePosition>.well_formed);
static_assert(
    !facts<co::Poll, co::Begin, co::Begin, co::Write, co::StorePosition, co::Commit, co::Commit>.well_formed);
static_assert(std::is_same_v<co::guarantee_of_steps_t<co::step_list<co::Poll, co::Write>>,
                             co::MayLoseAndDuplicate>);

TEST_CASE("the facts behind each built-in policy") {
  constexpr auto amo = co::policy_facts_v<co::AtMostOnce<>>;
  CHECK(amo.well_formed);
  CHECK(amo.position_durable_at < amo.write_durable_at);
  CHECK(amo.uses_position_store);
  CHECK_FALSE(amo.uses_transaction);

  constexpr auto alo = co::policy_facts_v<co::AtLeastOnce<>>;
  CHECK(alo.write_durable_at < alo.position_durable_at);
  CHECK(alo.uses_position_store);

  constexpr auto tx = co::policy_facts_v<co::TransactionalPosition<>>;
  CHECK(tx.write_durable_at == tx.position_durable_at);
  CHECK(tx.position_in_sink);
  CHECK_FALSE(tx.uses_position_store);
  CHECK(tx.uses_transaction);

  constexpr auto autoc = co::policy_facts_v<co::AtMostOnce<co::AutoCommit>>;
  CHECK(autoc.position_on_timer);
  CHECK(autoc.may_lose());
  CHECK(autoc.may_duplicate());
}

TEST_CASE("a malformed order says what is wrong with it") {
  CHECK(facts<co::Write, co::Poll, co::CommitPosition>.problem == "the first step must be Poll");
  CHECK(facts<co::Poll, co::Write, co::StorePosition>.problem ==
        "StorePosition must sit between Begin and Commit");
  CHECK(facts<co::Poll, co::Begin, co::Write, co::StorePosition>.problem ==
        "a Begin without its Commit");
}

TEST_CASE("step names read as the protocol") {
  using steps = co::AtLeastOnce<>::steps;
  CHECK(steps::names[0] == "poll");
  CHECK(steps::names[1] == "write");
  CHECK(steps::names[2] == "commit position");
  CHECK(co::guarantee_t<co::AtLeastOnce<>>::name ==
        std::string_view{"may duplicate (at-least-once)"});
}
