// commit_order/rules.hpp — every legality rule, in one place.
//
// A rule is a named type with a number, a one-line message that states the rule and the fix,
// the failure it prevents, and a predicate over a `combination` of source, sink, policy,
// position store and key. `verdict_t` is the first rule a combination violates, or `legal`.
// Rules are checked in the order of `all_rules`: each predicate may assume that every rule
// before it holds, so exactly one verdict — and one diagnostic — comes out of a misuse.
//
// The messages are macros only because C++20 `static_assert` needs a string literal; each
// rule's `message` member is the same text, which is what docs/legality.md is generated from.
#pragma once

#include <string_view>
#include <type_traits>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/key.hpp"
#include "commit_order/options.hpp"
#include "commit_order/policy.hpp"

// clang-format off
#define COMMIT_ORDER_MESSAGE_NOT_A_POLICY "commit_order: Policy is not a policy -- use AtMostOnce<>, AtLeastOnce<> or TransactionalPosition<>, or give your type `steps` and `trigger`"
#define COMMIT_ORDER_MESSAGE_NOT_A_SOURCE "commit_order: Source does not model commit_order::source -- it needs seek(position), poll(n) returning records, earliest() and end()"
#define COMMIT_ORDER_MESSAGE_NOT_A_SINK "commit_order: Sink does not model commit_order::sink -- it needs a row_type and apply(offset, row)"
#define COMMIT_ORDER_MESSAGE_ROW_MISMATCH "commit_order: the sink's row_type cannot be built from the source's events -- make the sink accept the event type, or map it with_transform<F>"
#define COMMIT_ORDER_MESSAGE_BAD_TRANSFORM "commit_order: the transform must be a stateless, default-constructible function object taking the event -- e.g. a captureless lambda"
#define COMMIT_ORDER_MESSAGE_BAD_HANDLING "commit_order: unknown error handling -- use stop, retry<N> or dead_letter<N>"
#define COMMIT_ORDER_MESSAGE_NOT_DEAD_LETTERS "commit_order: the dead-letter sink does not model commit_order::dead_letter_sink -- it needs put(offset, event, reason)"
#define COMMIT_ORDER_MESSAGE_UNDECLARED "commit_order: the sink declares no capabilities -- add `using capabilities = commit_order::capabilities<...>;` or specialise capability_traits"
#define COMMIT_ORDER_MESSAGE_TX_SHAPE "commit_order: the sink declares Transactional but lacks begin/commit/rollback/store_position/load_position -- implement them or drop the tag"
#define COMMIT_ORDER_MESSAGE_NOT_A_STORE "commit_order: the position store does not model commit_order::position_store -- it needs load() and commit(position)"
#define COMMIT_ORDER_MESSAGE_R0 "commit_order R0: the policy's step list is malformed -- Poll first, then one Write and one position step, with StorePosition between Begin and Commit"
#define COMMIT_ORDER_MESSAGE_R1 "commit_order R1: AutoCommit needs an Idempotent sink -- the timer both replays and skips records; key the sink on the event or commit explicitly"
#define COMMIT_ORDER_MESSAGE_R2 "commit_order R2: AutoCommit makes this no-loss step order at-most-once -- the timer commits before the write; use EveryBatch or EveryRecord"
#define COMMIT_ORDER_MESSAGE_R3 "commit_order R3: this policy replays after a crash and the sink would store replays as duplicate rows -- make the sink Idempotent (keyed upsert) or DuplicatesHarmless"
#define COMMIT_ORDER_MESSAGE_R4 "commit_order R4: the position cannot be stored in a sink without multi-row transactions -- use a Transactional sink, or AtLeastOnce with an Idempotent sink"
#define COMMIT_ORDER_MESSAGE_R5 "commit_order R5: TransactionalPosition needs an OffsetGuarded sink -- a replayed older record would overwrite newer data; guard the upsert on source_offset"
#define COMMIT_ORDER_MESSAGE_R6 "commit_order R6: this policy may lose records and the sink is a Ledger -- use AtLeastOnce with an Idempotent sink, or TransactionalPosition"
#define COMMIT_ORDER_MESSAGE_R7 "commit_order R7: a SideEffecting sink cannot be made idempotent by ordering -- write to an outbox with a claim check and send from there"
#define COMMIT_ORDER_MESSAGE_R8 "commit_order R8: the idempotency key must be a stateless projection of the event -- use key<&Event::member...>, never a UUID, a counter or now()"
#define COMMIT_ORDER_MESSAGE_R9 "commit_order R9: the position store is less durable than the sink it vouches for -- use a store declared at least as durable as the sink"
#define COMMIT_ORDER_MESSAGE_R10 "commit_order R10: this policy commits its position to a position store and none was given -- pass one with with_store<Store>"
#define COMMIT_ORDER_MESSAGE_R11 "commit_order R11: dead_letter error handling needs somewhere to put the records it gives up on -- pass with_dead_letters<Sink>"
#define COMMIT_ORDER_MESSAGE_R16 "commit_order R16: retrying a write outside a transaction can apply it twice (it may have landed before it failed) and this sink would keep both -- make it Idempotent or DuplicatesHarmless, or use stop"
#define COMMIT_ORDER_MESSAGE_NOT_AN_EXECUTOR "commit_order: the executor does not model commit_order::executor, or the events cannot be copied to it -- it needs execute(std::function<void()>)"
#define COMMIT_ORDER_MESSAGE_UNUSED_DEAD_LETTERS "commit_order: a dead-letter sink is given but the error handling never uses it -- use dead_letter<N>, or drop with_dead_letters"
#define COMMIT_ORDER_MESSAGE_R13 "commit_order R13: writes handed to an executor run on several threads and the sink does not declare Concurrent -- make apply thread-safe and declare it, or drop with_executor"
#define COMMIT_ORDER_MESSAGE_R14 "commit_order R14: a sink transaction belongs to one thread and cannot span writes handed to an executor -- use AtLeastOnce with a tracker, or write on the pipeline's thread"
#define COMMIT_ORDER_MESSAGE_R15 "commit_order R15: writes handed to an executor land out of order and this keyed sink has no offset guard -- an older record would overwrite a newer one; declare OffsetGuarded"
#define COMMIT_ORDER_MESSAGE_R12 "commit_order R12: the dead-letter sink is less durable than the sink -- the position passes a record only once it is written durably somewhere"
// clang-format on

namespace commit_order {

/// Everything the rules look at. `Store` is `no_position_store` when none is given; `Key` is
/// `no_key` for a sink without upsert key; the rest are the pipeline's options.
template <class Source, class Sink, class Policy, class Store = no_position_store,
          class Key = sink_key_t<Sink>, class Transform = identity_transform,
          class ErrorHandling = stop, class DeadLetters = no_dead_letters,
          class Executor = no_executor>
struct combination final {
  using source_type = Source;
  using sink_type = Sink;
  using policy_type = Policy;
  using store_type = Store;
  using key_type = Key;
  using transform_type = Transform;
  using error_handling_type = ErrorHandling;
  using dead_letters_type = DeadLetters;
  using executor_type = Executor;
};

namespace detail {
// Can the transform turn the source's event into the sink's row? Evaluated lazily, so a
// transform that cannot be called yields a verdict instead of a hard error.
template <class C>
constexpr bool rows_from_events() {
  using event = event_t<source_record_t<typename C::source_type>>;
  using transform = typename C::transform_type;
  if constexpr (std::is_invocable_v<const transform&, const event&>) {
    return std::is_convertible_v<std::invoke_result_t<const transform&, const event&>,
                                 const sink_row_t<typename C::sink_type>&>;
  } else {
    return false;
  }
}
}  // namespace detail

namespace rules {

/// The verdict for a combination that violates no rule.
struct legal final {
  static constexpr std::string_view id = "legal";
  static constexpr std::string_view message = "legal";
};

// ---- shape: is each argument the kind of thing the rules can judge? ------------------------

struct not_a_policy final {
  static constexpr std::string_view id = "S1";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_NOT_A_POLICY;
  static constexpr std::string_view prevents = "judging an order that is not one";
  template <class C>
  static constexpr bool violated = !policy<typename C::policy_type>;
};

struct not_a_source final {
  static constexpr std::string_view id = "S2";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_NOT_A_SOURCE;
  static constexpr std::string_view prevents = "a loop over something that cannot be resumed";
  template <class C>
  static constexpr bool violated = !source<typename C::source_type>;
};

struct not_a_sink final {
  static constexpr std::string_view id = "S3";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_NOT_A_SINK;
  static constexpr std::string_view prevents = "a loop with nowhere to write";
  template <class C>
  static constexpr bool violated = !sink<typename C::sink_type>;
};

struct bad_transform final {
  static constexpr std::string_view id = "S4";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_BAD_TRANSFORM;
  static constexpr std::string_view prevents =
      "a mapping whose output depends on more than the event";
  template <class C>
  static constexpr bool violated = !std::is_empty_v<typename C::transform_type> ||
                                   !std::default_initializable<typename C::transform_type>;
};

struct row_mismatch final {
  static constexpr std::string_view id = "S5";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_ROW_MISMATCH;
  static constexpr std::string_view prevents = "writing rows the sink cannot take";
  template <class C>
  static constexpr bool violated = !detail::rows_from_events<C>();
};

struct undeclared_capabilities final {
  static constexpr std::string_view id = "S6";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_UNDECLARED;
  static constexpr std::string_view prevents = "judging a sink that has not said what it is";
  template <class C>
  static constexpr bool violated = !declares_capabilities<typename C::sink_type>;
};

struct transactional_shape final {
  static constexpr std::string_view id = "S7";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_TX_SHAPE;
  static constexpr std::string_view prevents = "a Transactional claim the sink cannot honour";
  template <class C>
  static constexpr bool violated = has_capability_v<typename C::sink_type, Transactional> &&
                                   !transactional_sink<typename C::sink_type>;
};

struct not_a_position_store final {
  static constexpr std::string_view id = "S8";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_NOT_A_STORE;
  static constexpr std::string_view prevents = "committing a position nowhere";
  template <class C>
  static constexpr bool violated = !std::is_same_v<typename C::store_type, no_position_store> &&
                                   !position_store<typename C::store_type>;
};

struct bad_error_handling final {
  static constexpr std::string_view id = "S9";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_BAD_HANDLING;
  static constexpr std::string_view prevents = "failure handling nobody can read off the type";
  template <class C>
  static constexpr bool violated = !error_handling<typename C::error_handling_type>;
};

struct not_dead_letters final {
  static constexpr std::string_view id = "S10";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_NOT_DEAD_LETTERS;
  static constexpr std::string_view prevents = "giving up on a record with nowhere to keep it";
  template <class C>
  static constexpr bool violated =
      !std::is_same_v<typename C::dead_letters_type, no_dead_letters> &&
      !dead_letter_sink<typename C::dead_letters_type,
                        event_t<source_record_t<typename C::source_type>>>;
};

struct not_an_executor final {
  static constexpr std::string_view id = "S11";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_NOT_AN_EXECUTOR;
  static constexpr std::string_view prevents = "handing writes to something that cannot run them";
  template <class C>
  static constexpr bool violated =
      !std::is_same_v<typename C::executor_type, no_executor> &&
      (!executor<typename C::executor_type> ||
       !std::copy_constructible<event_t<source_record_t<typename C::source_type>>>);
};

struct unused_dead_letters final {
  static constexpr std::string_view id = "S12";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_UNUSED_DEAD_LETTERS;
  static constexpr std::string_view prevents = "a dead-letter sink that silently never receives";
  template <class C>
  static constexpr bool violated =
      !std::is_same_v<typename C::dead_letters_type, no_dead_letters> &&
      !C::error_handling_type::dead_letters;
};

// ---- the legality rules --------------------------------------------------------------------

/// R0 — the step order must be one the derivation can judge.
struct malformed_step_order final {
  static constexpr std::string_view id = "R0";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R0;
  static constexpr std::string_view prevents = "a guarantee computed from an order that has none";
  template <class C>
  static constexpr bool violated =
      !facts_of_v<typename C::policy_type::steps>.well_formed ||
      !facts_of_v<effective_steps_t<typename C::policy_type>>.well_formed;
};

/// R1 — auto-commit replays up to one interval and also loses: a non-idempotent sink gets
/// duplicates *and* gaps.
struct auto_commit_needs_idempotent_sink final {
  static constexpr std::string_view id = "R1";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R1;
  static constexpr std::string_view prevents = "duplicates and gaps at once";
  template <class C>
  static constexpr bool violated = policy_facts_v<typename C::policy_type>.position_on_timer &&
                                   !has_capability_v<typename C::sink_type, Idempotent>;
};

/// R2 — auto-commit is commit-then-write with extra steps: an order that claims no loss
/// becomes at-most-once. Computed: the claimed order cannot lose, the executed one can.
struct auto_commit_makes_order_lossy final {
  static constexpr std::string_view id = "R2";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R2;
  static constexpr std::string_view prevents = "at-most-once under an at-least-once name";
  template <class C>
  static constexpr bool violated = !claimed_guarantee_t<typename C::policy_type>::may_lose &&
                                   guarantee_t<typename C::policy_type>::may_lose;
};

/// R3 — the ordered duplicate: replays become duplicate rows.
struct replay_needs_idempotent_sink final {
  static constexpr std::string_view id = "R3";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R3;
  static constexpr std::string_view prevents = "the ordered duplicate";
  template <class C>
  static constexpr bool violated = guarantee_t<typename C::policy_type>::may_duplicate &&
                                   !has_capability_v<typename C::sink_type, Idempotent> &&
                                   !has_capability_v<typename C::sink_type, DuplicatesHarmless>;
};

/// R4 — the position cannot fold into a sink without multi-row transactions.
struct position_needs_transactional_sink final {
  static constexpr std::string_view id = "R4";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R4;
  static constexpr std::string_view prevents = "a transaction the sink does not have";
  template <class C>
  static constexpr bool violated = (policy_facts_v<typename C::policy_type>.uses_transaction ||
                                    policy_facts_v<typename C::policy_type>.position_in_sink) &&
                                   !has_capability_v<typename C::sink_type, Transactional>;
};

/// R5 — a replayed older record would overwrite newer data.
struct transactional_position_needs_offset_guard final {
  static constexpr std::string_view id = "R5";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R5;
  static constexpr std::string_view prevents = "older data overwriting newer data";
  template <class C>
  static constexpr bool violated = policy_facts_v<typename C::policy_type>.position_in_sink &&
                                   !has_capability_v<typename C::sink_type, OffsetGuarded>;
};

/// R6 — keep lossy configurations away from anything a ledger reads.
struct ledger_must_not_lose final {
  static constexpr std::string_view id = "R6";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R6;
  static constexpr std::string_view prevents = "a ledger that is quietly short";
  template <class C>
  static constexpr bool violated = guarantee_t<typename C::policy_type>::may_lose&&
      has_capability_v<typename C::sink_type, Ledger>;
};

/// R7 — ordering cannot make an e-mail idempotent.
struct side_effects_need_outbox final {
  static constexpr std::string_view id = "R7";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R7;
  static constexpr std::string_view prevents = "a second e-mail, a second payment";
  template <class C>
  static constexpr bool violated = has_capability_v<typename C::sink_type, SideEffecting>;
};

/// R8 — a consumer-derived key makes every retry look new.
struct key_must_derive_from_event final {
  static constexpr std::string_view id = "R8";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R8;
  static constexpr std::string_view prevents = "a retry that looks like a new record";
  template <class C>
  static constexpr bool violated =
      !std::is_same_v<typename C::key_type, no_key> &&
      !event_derived_key<typename C::key_type, sink_row_t<typename C::sink_type>>;
};

/// R9 — the position must be at least as durable as what it vouches for.
struct store_less_durable_than_sink final {
  static constexpr std::string_view id = "R9";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R9;
  static constexpr std::string_view prevents = "a position that forgets what the sink kept";
  template <class C>
  static constexpr bool violated = policy_facts_v<typename C::policy_type>.uses_position_store &&
                                   !std::is_same_v<typename C::store_type, no_position_store> &&
                                   store_durability_t<typename C::store_type>::rank <
                                       sink_durability_t<typename C::sink_type>::rank;
};

/// R10 — a policy that commits to a position store needs one.
struct position_store_missing final {
  static constexpr std::string_view id = "R10";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R10;
  static constexpr std::string_view prevents = "a position that is never recorded";
  template <class C>
  static constexpr bool violated = policy_facts_v<typename C::policy_type>.uses_position_store&&
                                       std::is_same_v<typename C::store_type, no_position_store>;
};

/// R11 — dead-lettering needs a dead-letter sink.
struct dead_letters_missing final {
  static constexpr std::string_view id = "R11";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R11;
  static constexpr std::string_view prevents = "a skipped record with no trace";
  template <class C>
  static constexpr bool violated = C::error_handling_type::dead_letters&&
      std::is_same_v<typename C::dead_letters_type, no_dead_letters>;
};

/// R12 — a record the position passes must be durable somewhere: the dead-letter sink must be at
/// least as durable as the sink it stands in for.
struct dead_letters_less_durable final {
  static constexpr std::string_view id = "R12";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R12;
  static constexpr std::string_view prevents = "a dead letter that dies with the process";
  template <class C>
  static constexpr bool violated =
      C::error_handling_type::dead_letters&&
          declared_durability_t<typename C::dead_letters_type, Volatile>::rank <
      sink_durability_t<typename C::sink_type>::rank;
};

/// R13 — an executor calls the sink from several threads.
struct executor_needs_concurrent_sink final {
  static constexpr std::string_view id = "R13";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R13;
  static constexpr std::string_view prevents = "a data race inside the sink";
  template <class C>
  static constexpr bool violated = !std::is_same_v<typename C::executor_type, no_executor> &&
                                   !has_capability_v<typename C::sink_type, Concurrent>;
};

/// R14 — a transaction is one connection's: writes spread over threads cannot share it.
struct executor_splits_transaction final {
  static constexpr std::string_view id = "R14";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R14;
  static constexpr std::string_view prevents =
      "a commit that does not cover the rows it vouches for";
  template <class C>
  static constexpr bool violated = !std::is_same_v<typename C::executor_type, no_executor> &&
                                   policy_facts_v<typename C::policy_type>.uses_transaction;
};

/// R15 — out-of-order completion with a keyed upsert needs the offset guard.
struct out_of_order_needs_offset_guard final {
  static constexpr std::string_view id = "R15";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R15;
  static constexpr std::string_view prevents = "an older record landing after a newer one";
  template <class C>
  static constexpr bool violated = !std::is_same_v<typename C::executor_type, no_executor> &&
                                   has_capability_v<typename C::sink_type, Idempotent> &&
                                   !has_capability_v<typename C::sink_type, OffsetGuarded>;
};

/// R16 — a retried write that had landed before it failed is applied twice.
struct retry_needs_idempotent_sink final {
  static constexpr std::string_view id = "R16";
  static constexpr std::string_view message = COMMIT_ORDER_MESSAGE_R16;
  static constexpr std::string_view prevents = "a duplicate made by the retry itself";
  template <class C>
  static constexpr bool violated = C::error_handling_type::retries > 0 &&
                                   !policy_facts_v<typename C::policy_type>.uses_transaction &&
                                   !has_capability_v<typename C::sink_type, Idempotent> &&
                                   !has_capability_v<typename C::sink_type, DuplicatesHarmless>;
};

/// The order in which rules are checked: shape first, then the most fundamental problem
/// (a sink no ordering can save, a key that defeats idempotency) before finer ones.
template <class... Rules>
struct rule_list final {};

using all_rules =
    rule_list<not_a_policy, malformed_step_order, not_a_source, not_a_sink, bad_transform,
              row_mismatch, undeclared_capabilities, transactional_shape, not_a_position_store,
              bad_error_handling, not_dead_letters, not_an_executor, unused_dead_letters,
              side_effects_need_outbox, key_must_derive_from_event, auto_commit_makes_order_lossy,
              auto_commit_needs_idempotent_sink, replay_needs_idempotent_sink,
              position_needs_transactional_sink, transactional_position_needs_offset_guard,
              ledger_must_not_lose, store_less_durable_than_sink, position_store_missing,
              dead_letters_missing, dead_letters_less_durable, executor_needs_concurrent_sink,
              executor_splits_transaction, out_of_order_needs_offset_guard,
              retry_needs_idempotent_sink>;

namespace detail {
// Each predicate is only instantiated once every rule before it has passed.
template <class C, class Rules>
struct first_violation;
template <class C>
struct first_violation<C, rule_list<>> {
  using type = legal;
};
template <class C, class Rule, class... Rest>
struct first_violation<C, rule_list<Rule, Rest...>> {
  using type = typename std::conditional_t<Rule::template violated<C>, std::type_identity<Rule>,
                                           first_violation<C, rule_list<Rest...>>>::type;
};
}  // namespace detail

}  // namespace rules

/// The verdict of a combination: `rules::legal`, or the first rule it violates.
template <class Combination>
using verdict_of_t = typename rules::detail::first_violation<Combination, rules::all_rules>::type;

/// The verdict for a pipeline's parts (Store defaults to none; Key to the sink's own key).
template <class Source, class Sink, class Policy, class Store = no_position_store,
          class Key = sink_key_t<Sink>>
using verdict_t = verdict_of_t<combination<Source, Sink, Policy, Store, Key>>;

/// True when the combination violates no rule.
template <class Source, class Sink, class Policy, class Store = no_position_store,
          class Key = sink_key_t<Sink>>
inline constexpr bool is_legal_v =
    std::is_same_v<verdict_t<Source, Sink, Policy, Store, Key>, rules::legal>;

}  // namespace commit_order
