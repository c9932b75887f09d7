// SPDX-License-Identifier: BSL-1.0
// commit_order/pipeline.hpp — the consumer loop whose failure direction is its type.
//
//   commit_order::pipeline<Source, Sink, Policy, Options...>
//
// The loop executes the policy's steps in the policy's order — the same list the guarantee is
// derived from — so what the type promises is what the loop does. Every legality rule is
// checked when a pipeline is constructed, before anything that depends on the parts runs: a
// misuse gives one static_assert carrying the rule's message, and nothing after it. An illegal
// pipeline stands on `rejected_pipeline`, which offers the whole public surface, so code that
// uses its members adds no second error. (`can_make_pipeline` and `verdict_t` answer the same
// question for a type without constructing it.)
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "commit_order/detail/pipeline_impl.hpp"
#include "commit_order/options.hpp"
#include "commit_order/rules.hpp"

namespace commit_order {

namespace detail {
template <class Config>
inline constexpr bool legal_v = std::is_same_v<verdict_of_t<Config>, rules::legal>;

// A legal configuration with an executor whose support was not included stands on
// rejected_pipeline too, so the constructor's message about the include is the only error.
template <class Config>
using pipeline_base_t = std::conditional_t<legal_v<Config> && executor_support_v<Config>,
                                           pipeline_impl<Config>, rejected_pipeline<Config>>;

// What the constructor was given, judged against what the configuration keeps by reference.
template <class Config, class... Args>
struct arguments final {
  template <std::size_t I>
  using at = std::tuple_element_t<I, std::tuple<Args...>>;
  template <class A, class T>
  static constexpr bool names = std::is_same_v<std::remove_cvref_t<A>, T>;
  template <class A, class T>
  static constexpr bool lvalue_of = std::is_same_v<A, T&>;
  template <class T>
  static constexpr std::size_t count = (std::size_t{names<Args, T>} + ... + 0);

  static constexpr bool has_parts = sizeof...(Args) >= 2;
  template <std::size_t I, class T>
  static constexpr bool is_type = [] {
    if constexpr (I < sizeof...(Args)) {
      return names<at<I>, T>;
    } else {
      return false;
    }
  }();
  template <std::size_t I, class T>
  static constexpr bool is_lvalue = [] {
    if constexpr (I < sizeof...(Args)) {
      return lvalue_of<at<I>, T>;
    } else {
      return false;
    }
  }();

  using store = typename Config::store_type;
  using dead_letters = typename Config::dead_letters_type;
  using executor = typename Config::executor_type;

  template <class A>
  static constexpr bool extra_known = names<A, settings> ||
                                      (Config::has_store && names<A, store>) ||
                                      (Config::has_dead_letters && names<A, dead_letters>) ||
                                      (Config::has_executor && names<A, executor>);
  template <class A>
  static constexpr bool extra_kept_as_temporary =
      !names<A, settings> && extra_known<A> && !std::is_lvalue_reference_v<A>;

  template <class First, class Second, class... Extras>
  static constexpr bool extras_known_impl(
      std::type_identity<std::tuple<First, Second, Extras...>>) {
    return (extra_known<Extras> && ...);
  }
  template <class First, class Second, class... Extras>
  static constexpr bool extras_lvalues_impl(
      std::type_identity<std::tuple<First, Second, Extras...>>) {
    return (!extra_kept_as_temporary<Extras> && ...);
  }
  static constexpr bool extras_known = [] {
    if constexpr (has_parts) {
      return extras_known_impl(std::type_identity<std::tuple<Args...>>{});
    } else {
      return true;
    }
  }();
  static constexpr bool extras_lvalues = [] {
    if constexpr (has_parts) {
      return extras_lvalues_impl(std::type_identity<std::tuple<Args...>>{});
    } else {
      return true;
    }
  }();
  static constexpr bool store_given = !Config::has_store || count<store> == 1;
  static constexpr bool dead_letters_given = !Config::has_dead_letters || count<dead_letters> == 1;
  static constexpr bool executor_given = !Config::has_executor || count<executor> == 1;
  static constexpr bool settings_once = count<settings> <= 1;
};
}  // namespace detail

template <class Source, class Sink, class Policy, class... Options>
class pipeline final
    : public detail::pipeline_base_t<configuration<Source, Sink, Policy, Options...>> {
  using config = configuration<Source, Sink, Policy, Options...>;
  using verdict = verdict_of_t<config>;
  using base = detail::pipeline_base_t<config>;

 public:
  /// `pipeline(source, sink, parts...)`: the source and the sink (kept by reference), then the
  /// parts the options name — the position store, the dead-letter sink, the executor, each kept
  /// by reference — and `settings`, in any order.
  template <class... Args>
  explicit pipeline(Args&&... args) : base(std::forward<Args>(args)...) {
    // The rule checks: generated from rules::all_rules by tools/rule_checks.cpp (regenerate
    // with `cmake --build <dir> --target rule_checks`; never edit by hand). Exactly one of them
    // can fail: `verdict` names the first violated rule. They sit here rather than in the class
    // body so that a rejected pipeline stays a valid class (clang gives up on a class whose body
    // failed), and code that uses its members adds no error to the rule's.
    // BEGIN GENERATED RULE CHECKS
    // clang-format off
    static_assert(rules::registry_fingerprint == 0x2243a9fa3dbc6e66ULL,
                  "commit_order: the rule checks in pipeline.hpp are stale -- regenerate them with `cmake --build <dir> --target rule_checks`");
    static_assert(!std::is_same_v<verdict, rules::unknown_option>,
                  "commit_order S0: unknown or repeated pipeline option -- each of with_store, with_clock, with_transform, with_observer, with_faults, with_error_handling, with_dead_letters and with_executor may be given once");
    static_assert(!std::is_same_v<verdict, rules::not_a_trigger>,
                  "commit_order S13: the policy's argument is not a commit trigger -- AtMostOnce, AtLeastOnce and TransactionalPosition take EveryRecord, EveryBatch (the default) or AutoCommit; capabilities such as Idempotent are declared by the sink");
    static_assert(!std::is_same_v<verdict, rules::not_a_policy>,
                  "commit_order S1: Policy is not a policy -- use AtMostOnce<>, AtLeastOnce<> or TransactionalPosition<>, or give your type `steps` (a step_list) and `trigger`");
    static_assert(!std::is_same_v<verdict, rules::malformed_step_order>,
                  "commit_order R0: the policy's step list is malformed -- Poll first, then one Write and one position step, with StorePosition between Begin and Commit");
    static_assert(!std::is_same_v<verdict, rules::not_a_source>,
                  "commit_order S2: Source does not model commit_order::source -- it needs seek(position), poll(n) returning a sized random-access range of records, earliest() and end() returning position (or their per-partition forms, see partitioned_source)");
    static_assert(!std::is_same_v<verdict, rules::source_durability_undeclared>,
                  "commit_order S25: the source declares no durability -- add `using capabilities = commit_order::capabilities<Replicated>;` (a broker), Synced (a log fsync'ed on append), Buffered or Volatile");
    static_assert(!std::is_same_v<verdict, rules::apply_takes_mutable_row>,
                  "commit_order S14: the sink's apply takes the row by non-const reference -- declare it apply(offset, const row_type&): the pipeline never hands out a mutable row");
    static_assert(!std::is_same_v<verdict, rules::not_a_sink>,
                  "commit_order S3: Sink does not model commit_order::sink -- it needs `using row_type = ...;` and apply(offset, const row_type&) (or apply(partition_id, offset, const row_type&))");
    static_assert(!std::is_same_v<verdict, rules::bad_transform>,
                  "commit_order S4: the transform must be a stateless, default-constructible function object taking the event -- e.g. a captureless lambda");
    static_assert(!std::is_same_v<verdict, rules::row_mismatch>,
                  "commit_order S5: the sink's row_type cannot be built from the source's events -- make the sink accept the event type, or map it with_transform<F>");
    static_assert(!std::is_same_v<verdict, rules::flush_not_callable>,
                  "commit_order S30: the sink declares Flushed or has a flush member, and the pipeline cannot call flush() -- declare void flush() (durable on return, or throw), and forward it from a wrapper: a flush the loop skips lets the position pass rows still in flight");
    static_assert(!std::is_same_v<verdict, rules::undeclared_capabilities>,
                  "commit_order S6: the sink declares no capabilities -- add `using capabilities = commit_order::capabilities<...>;` or specialise capability_traits");
    static_assert(!std::is_same_v<verdict, rules::sink_durability_undeclared>,
                  "commit_order S23: the sink declares no durability -- add one of Volatile, Buffered, Synced or Replicated to its capabilities: what a write that returned survives");
    static_assert(!std::is_same_v<verdict, rules::restated_capabilities>,
                  "commit_order S28: the sink restates capabilities its adapter does not implement -- a sink derived from an adapter's sink keeps the adapter's capabilities and durability (its implemented_capabilities) and may add only Ledger, SideEffecting or MaxTransactionRows<N>");
    static_assert(!std::is_same_v<verdict, rules::append_only_upsert>,
                  "commit_order S29: the sink declares AppendOnly and an upsert (Idempotent, OffsetGuarded or VersionGuarded) -- a sink either keeps every row it is given or replaces rows by key; drop one of the claims");
    static_assert(!std::is_same_v<verdict, rules::keyless_idempotency>,
                  "commit_order S15: the sink declares Idempotent or OffsetGuarded but names no key -- add `using key_type = commit_order::key<&Event::member...>;` for the key its upsert conflicts on, or drop the claim");
    static_assert(!std::is_same_v<verdict, rules::transactional_shape>,
                  "commit_order S7: the sink declares Transactional but lacks begin(), commit() or rollback() -- implement them or drop the tag");
    static_assert(!std::is_same_v<verdict, rules::transactional_position_shape>,
                  "commit_order S16: the sink declares Transactional but lacks store_position(position) or load_position() (or their per-partition forms) -- a Transactional sink keeps the position in its transaction");
    static_assert(!std::is_same_v<verdict, rules::load_position_type>,
                  "commit_order S17: the sink's load_position() must return std::optional<position> -- empty before the first commit, never a sentinel such as position{0}");
    static_assert(!std::is_same_v<verdict, rules::not_a_position_store>,
                  "commit_order S8: the position store does not model commit_order::position_store -- it needs load() returning std::optional<position> and commit(position)");
    static_assert(!std::is_same_v<verdict, rules::store_durability_undeclared>,
                  "commit_order S24: the position store declares no durability -- add `using capabilities = commit_order::capabilities<Synced>;` (or Volatile, Buffered, Replicated): what a commit that returned survives");
    static_assert(!std::is_same_v<verdict, rules::bad_error_handling>,
                  "commit_order S9: unknown error handling -- use stop, retry<N> or dead_letter<N>");
    static_assert(!std::is_same_v<verdict, rules::not_dead_letters>,
                  "commit_order S10: the dead-letter sink does not model commit_order::dead_letter_sink -- it needs put(offset, const Event&, const char* reason)");
    static_assert(!std::is_same_v<verdict, rules::not_an_executor>,
                  "commit_order S11: the executor does not model commit_order::executor, or the events cannot be copied to it -- it needs execute(std::function<void()>)");
    static_assert(!std::is_same_v<verdict, rules::unused_dead_letters>,
                  "commit_order S12: a dead-letter sink is given but the error handling never uses it -- use dead_letter<N>, or drop with_dead_letters");
    static_assert(!std::is_same_v<verdict, rules::unused_store>,
                  "commit_order S18: a position store is given but this policy keeps its position in the sink's transaction and would never write it -- drop with_store");
    static_assert(!std::is_same_v<verdict, rules::unused_clock>,
                  "commit_order S19: a clock is given but only AutoCommit's timer reads one -- drop with_clock, or use an AutoCommit policy");
    static_assert(!std::is_same_v<verdict, rules::bad_clock>,
                  "commit_order S20: the clock cannot drive AutoCommit's timer -- give it a time_point type and a static now() returning it, with durations comparable to milliseconds, like std::chrono::steady_clock");
    static_assert(!std::is_same_v<verdict, rules::bad_fault_injector>,
                  "commit_order S21: the fault injector needs at(const fault_point&) -- with another signature (e.g. at(fault_point&)) it would never be called and a crash test never crash");
    static_assert(!std::is_same_v<verdict, rules::observer_hook_mismatch>,
                  "commit_order S22: an observer's on(event, ...) overload does not take what the pipeline passes -- on(polled, size_t, position); on(row_written | replay_absorbed | dead_lettered | record_failed, offset); on(unit_committed | auto_committed, position); on(retried, offset, size_t)");
    static_assert(!std::is_same_v<verdict, rules::partition_scoped_apply>,
                  "commit_order S26: the sink declares PartitionScoped but has no apply(partition_id, offset, const row_type&) -- its rows must record the partition they came from");
    static_assert(!std::is_same_v<verdict, rules::source_policy_mismatch>,
                  "commit_order S27: the source was built for another policy than the pipeline's -- give the source the pipeline's policy (e.g. kafka::group_source<Event, AtLeastOnce<>> in a pipeline of AtLeastOnce<>): it sets up its commits for the policy it is given");
    static_assert(!std::is_same_v<verdict, rules::side_effects_need_outbox>,
                  "commit_order R7: a SideEffecting sink cannot be made idempotent by ordering -- write to an outbox with a claim check and send from there");
    static_assert(!std::is_same_v<verdict, rules::key_must_derive_from_event>,
                  "commit_order R8: the idempotency key must be a stateless projection of the event -- use key<&Event::member...>, never a UUID, a counter or now()");
    static_assert(!std::is_same_v<verdict, rules::auto_commit_makes_order_lossy>,
                  "commit_order R2: AutoCommit makes this no-loss step order at-most-once -- the timer commits before the write; use EveryBatch or EveryRecord");
    static_assert(!std::is_same_v<verdict, rules::auto_commit_needs_idempotent_sink>,
                  "commit_order R1: AutoCommit needs an Idempotent sink -- the timer both replays and skips records; key the sink on the event or commit explicitly");
    static_assert(!std::is_same_v<verdict, rules::replay_needs_idempotent_sink>,
                  "commit_order R3: this policy replays after a crash and the sink would store replays as duplicate rows -- make the sink Idempotent (keyed upsert) or DuplicatesHarmless");
    static_assert(!std::is_same_v<verdict, rules::position_needs_transactional_sink>,
                  "commit_order R4: the position cannot be stored in a sink without multi-row transactions -- use a Transactional sink, or AtLeastOnce with an Idempotent sink");
    static_assert(!std::is_same_v<verdict, rules::transactional_position_needs_offset_guard>,
                  "commit_order R5: TransactionalPosition needs an OffsetGuarded sink -- a replayed older record would overwrite newer data; guard the upsert on source_offset");
    static_assert(!std::is_same_v<verdict, rules::offset_guard_needs_partition>,
                  "commit_order R17: a partitioned source feeds an offset-guarded sink whose rows do not carry their partition -- offsets of different partitions are not comparable; use a PartitionScoped sink (rows carry source_partition) or VersionGuarded<&Event::version>");
    static_assert(!std::is_same_v<verdict, rules::ledger_must_not_lose>,
                  "commit_order R6: this policy may lose records and the sink is a Ledger -- use AtLeastOnce with an Idempotent sink, or TransactionalPosition");
    static_assert(!std::is_same_v<verdict, rules::position_store_missing>,
                  "commit_order R10: this policy commits its position to a position store and none was given -- pass one with with_store<Store>");
    static_assert(!std::is_same_v<verdict, rules::positions_per_partition>,
                  "commit_order R19: a partitioned source has one position per partition and this sink or store keeps only one -- use a store with load(partition)/commit(partition, position), or a sink with load_position(partition)/store_position(partition, position)");
    static_assert(!std::is_same_v<verdict, rules::group_needs_fencing_sink>,
                  "commit_order R18: a group-managed source moves partitions between consumers and this sink cannot fence a stale owner -- keep the position in a fencing sink (claim(partition, epoch) and store_position(partition, position, epoch))");
    static_assert(!std::is_same_v<verdict, rules::sink_less_durable_than_store>,
                  "commit_order R9a: this policy makes the write durable before the position, and the sink is less durable than the position store -- a power loss would keep a position past rows that vanished; use a sink at least as durable as the store (behind Kafka's replicated offsets, a database with a synchronous standby: postgres::replicated)");
    static_assert(!std::is_same_v<verdict, rules::store_less_durable_than_sink>,
                  "commit_order R9b: this policy makes the position durable before the write, and the position store is less durable than the sink -- a power loss would replay into rows the sink kept; use a store at least as durable as the sink");
    static_assert(!std::is_same_v<verdict, rules::source_less_durable_than_position>,
                  "commit_order R9c: the source is less durable than the position stored for it -- after a power loss it could forget records behind the position and reuse their offsets; use a source at least as durable");
    static_assert(!std::is_same_v<verdict, rules::dead_letters_missing>,
                  "commit_order R11: dead_letter error handling needs somewhere to put the records it gives up on -- pass with_dead_letters<Sink>");
    static_assert(!std::is_same_v<verdict, rules::dead_letters_less_durable>,
                  "commit_order R12: the dead-letter sink is less durable than the sink -- the position passes a record only once it is written durably somewhere");
    static_assert(!std::is_same_v<verdict, rules::letters_need_their_sink>,
                  "commit_order R21: these dead letters commit in their own sink's transaction, so the pipeline must write through that sink and store its position there -- use their sink as the pipeline's sink under TransactionalPosition, or dead letters durable on put()");
    static_assert(!std::is_same_v<verdict, rules::executor_needs_concurrent_sink>,
                  "commit_order R13: writes handed to an executor run on several threads and the sink does not declare Concurrent -- make apply thread-safe and declare it, or drop with_executor");
    static_assert(!std::is_same_v<verdict, rules::executor_needs_durable_apply>,
                  "commit_order R20: this sink makes rows durable only at flush(), and an executor's tracker would commit past rows apply() handed over but did not make durable -- drop with_executor");
    static_assert(!std::is_same_v<verdict, rules::executor_splits_transaction>,
                  "commit_order R14: a sink transaction belongs to one thread and cannot span writes handed to an executor -- use AtLeastOnce with a tracker, or write on the pipeline's thread");
    static_assert(!std::is_same_v<verdict, rules::out_of_order_needs_offset_guard>,
                  "commit_order R15: writes handed to an executor land out of order and this keyed sink has no offset guard -- an older record would overwrite a newer one; declare OffsetGuarded");
    static_assert(!std::is_same_v<verdict, rules::retry_needs_idempotent_sink>,
                  "commit_order R16: retrying a write outside a transaction can apply it twice (it may have landed before it failed) and this sink would keep both -- make it Idempotent or DuplicatesHarmless, or use stop");
    // clang-format on
    // END GENERATED RULE CHECKS

    using a = detail::arguments<config, Args&&...>;
    // One misuse, one message: only the first problem is reported, and none on top of a rule.
    if constexpr (!detail::legal_v<config>) {
    } else if constexpr (!detail::executor_support_v<config>) {
      static_assert(detail::executor_support_v<config>,
                    "commit_order: with_executor needs #include <commit_order/executor.hpp> -- "
                    "the executor path is kept out of synchronous pipelines' headers");
    } else if constexpr (!a::has_parts) {
      static_assert(a::has_parts,
                    "commit_order: construct a pipeline as pipeline(source, sink, parts...) -- "
                    "the source and the sink come first");
    } else if constexpr (!a::template is_type<0, Source>) {
      static_assert(a::template is_type<0, Source>,
                    "commit_order: the first constructor argument must be the pipeline's Source");
    } else if constexpr (!a::template is_lvalue<0, Source>) {
      static_assert(a::template is_lvalue<0, Source>,
                    "commit_order: the source must outlive the pipeline, which keeps a reference "
                    "-- pass an lvalue, not a temporary");
    } else if constexpr (!a::template is_type<1, Sink>) {
      static_assert(a::template is_type<1, Sink>,
                    "commit_order: the second constructor argument must be the pipeline's Sink");
    } else if constexpr (!a::template is_lvalue<1, Sink>) {
      static_assert(a::template is_lvalue<1, Sink>,
                    "commit_order: the sink must outlive the pipeline, which keeps a reference "
                    "-- pass an lvalue, not a temporary");
    } else if constexpr (!a::extras_known) {
      static_assert(a::extras_known,
                    "commit_order: unexpected constructor argument -- after the source and the "
                    "sink pass only the parts the options name (store, dead letters, executor) "
                    "and settings");
    } else if constexpr (!a::extras_lvalues) {
      static_assert(a::extras_lvalues,
                    "commit_order: the position store, dead-letter sink and executor must "
                    "outlive the pipeline, which keeps references -- pass lvalues");
    } else if constexpr (!a::store_given) {
      static_assert(a::store_given,
                    "commit_order: pass the position store named by with_store<> "
                    "to the constructor, once");
    } else if constexpr (!a::dead_letters_given) {
      static_assert(a::dead_letters_given,
                    "commit_order: pass the dead-letter sink named by with_dead_letters<> to the "
                    "constructor, once");
    } else if constexpr (!a::executor_given) {
      static_assert(a::executor_given,
                    "commit_order: pass the executor named by with_executor<> "
                    "to the constructor, once");
    } else if constexpr (!a::settings_once) {
      static_assert(a::settings_once, "commit_order: pass settings to the constructor once");
    }
  }
};

}  // namespace commit_order
