// commit_order/pipeline.hpp — the consumer loop whose failure direction is its type.
//
//   commit_order::pipeline<Source, Sink, Policy, Options...>
//
// The loop executes the policy's steps in the policy's order — the same list the guarantee is
// derived from — so what the type promises is what the loop does. Every legality rule is
// checked before anything that depends on the parts is instantiated: a misuse gives one
// static_assert carrying the rule's message, and nothing after it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>

#include "commit_order/concepts.hpp"
#include "commit_order/detail/pipeline_impl.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/observer.hpp"
#include "commit_order/options.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/rules.hpp"

#define COMMIT_ORDER_MESSAGE_UNKNOWN_OPTION                                                 \
  "commit_order: unknown or repeated pipeline option -- each of with_store, with_clock, "   \
  "with_transform, with_observer, with_faults, with_error_handling, with_dead_letters and " \
  "with_executor may be given once"

namespace commit_order {

namespace detail {
// Resolves the options (each to its default when absent) and judges the combination.
template <class Source, class Sink, class Policy, class... Options>
struct pipeline_parts {
  using store = typename find_option<with_store, no_position_store, Options...>::type;
  using clock = typename find_option<with_clock, std::chrono::steady_clock, Options...>::type;
  using transform = typename find_option<with_transform, identity_transform, Options...>::type;
  using observer = typename find_option<with_observer, no_observer, Options...>::type;
  using faults = typename find_option<with_faults, no_faults, Options...>::type;
  using error_handling = typename find_option<with_error_handling, stop, Options...>::type;
  using dead_letters = typename find_option<with_dead_letters, no_dead_letters, Options...>::type;
  using executor = typename find_option<with_executor, no_executor, Options...>::type;

  static constexpr bool options_known = options_well_formed<Options...>;
  using combination = commit_order::combination<Source, Sink, Policy, store, sink_key_t<Sink>,
                                                transform, error_handling, dead_letters, executor>;
  using verdict = std::conditional_t<options_known, verdict_of_t<combination>, rules::legal>;
  static constexpr bool ok = options_known && std::is_same_v<verdict, rules::legal>;
  using base = std::conditional_t<ok, pipeline_impl<Source, Sink, Policy, pipeline_parts>,
                                  rejected_pipeline>;
};
}  // namespace detail

/// True when `pipeline<Source, Sink, Policy, Options...>` is legal: the "can call" form of the
/// rules, for tests and for code that picks a policy by trying.
template <class Source, class Sink, class Policy, class... Options>
concept can_make_pipeline = detail::pipeline_parts<Source, Sink, Policy, Options...>::ok;

template <class Source, class Sink, class Policy, class... Options>
class pipeline final : public detail::pipeline_parts<Source, Sink, Policy, Options...>::base {
  using parts = detail::pipeline_parts<Source, Sink, Policy, Options...>;
  using verdict = typename parts::verdict;

  // Exactly one of these can fire: `verdict` names the first violated rule.
  static_assert(parts::options_known, COMMIT_ORDER_MESSAGE_UNKNOWN_OPTION);
  static_assert(!std::is_same_v<verdict, rules::not_a_policy>, COMMIT_ORDER_MESSAGE_NOT_A_POLICY);
  static_assert(!std::is_same_v<verdict, rules::malformed_step_order>, COMMIT_ORDER_MESSAGE_R0);
  static_assert(!std::is_same_v<verdict, rules::not_a_source>, COMMIT_ORDER_MESSAGE_NOT_A_SOURCE);
  static_assert(!std::is_same_v<verdict, rules::not_a_sink>, COMMIT_ORDER_MESSAGE_NOT_A_SINK);
  static_assert(!std::is_same_v<verdict, rules::bad_transform>, COMMIT_ORDER_MESSAGE_BAD_TRANSFORM);
  static_assert(!std::is_same_v<verdict, rules::row_mismatch>, COMMIT_ORDER_MESSAGE_ROW_MISMATCH);
  static_assert(!std::is_same_v<verdict, rules::undeclared_capabilities>,
                COMMIT_ORDER_MESSAGE_UNDECLARED);
  static_assert(!std::is_same_v<verdict, rules::transactional_shape>,
                COMMIT_ORDER_MESSAGE_TX_SHAPE);
  static_assert(!std::is_same_v<verdict, rules::not_a_position_store>,
                COMMIT_ORDER_MESSAGE_NOT_A_STORE);
  static_assert(!std::is_same_v<verdict, rules::bad_error_handling>,
                COMMIT_ORDER_MESSAGE_BAD_HANDLING);
  static_assert(!std::is_same_v<verdict, rules::not_dead_letters>,
                COMMIT_ORDER_MESSAGE_NOT_DEAD_LETTERS);
  static_assert(!std::is_same_v<verdict, rules::not_an_executor>,
                COMMIT_ORDER_MESSAGE_NOT_AN_EXECUTOR);
  static_assert(!std::is_same_v<verdict, rules::unused_dead_letters>,
                COMMIT_ORDER_MESSAGE_UNUSED_DEAD_LETTERS);
  static_assert(!std::is_same_v<verdict, rules::side_effects_need_outbox>, COMMIT_ORDER_MESSAGE_R7);
  static_assert(!std::is_same_v<verdict, rules::key_must_derive_from_event>,
                COMMIT_ORDER_MESSAGE_R8);
  static_assert(!std::is_same_v<verdict, rules::auto_commit_makes_order_lossy>,
                COMMIT_ORDER_MESSAGE_R2);
  static_assert(!std::is_same_v<verdict, rules::auto_commit_needs_idempotent_sink>,
                COMMIT_ORDER_MESSAGE_R1);
  static_assert(!std::is_same_v<verdict, rules::replay_needs_idempotent_sink>,
                COMMIT_ORDER_MESSAGE_R3);
  static_assert(!std::is_same_v<verdict, rules::position_needs_transactional_sink>,
                COMMIT_ORDER_MESSAGE_R4);
  static_assert(!std::is_same_v<verdict, rules::transactional_position_needs_offset_guard>,
                COMMIT_ORDER_MESSAGE_R5);
  static_assert(!std::is_same_v<verdict, rules::ledger_must_not_lose>, COMMIT_ORDER_MESSAGE_R6);
  static_assert(!std::is_same_v<verdict, rules::store_less_durable_than_sink>,
                COMMIT_ORDER_MESSAGE_R9);
  static_assert(!std::is_same_v<verdict, rules::position_store_missing>, COMMIT_ORDER_MESSAGE_R10);
  static_assert(!std::is_same_v<verdict, rules::dead_letters_missing>, COMMIT_ORDER_MESSAGE_R11);
  static_assert(!std::is_same_v<verdict, rules::dead_letters_less_durable>,
                COMMIT_ORDER_MESSAGE_R12);
  static_assert(!std::is_same_v<verdict, rules::executor_needs_concurrent_sink>,
                COMMIT_ORDER_MESSAGE_R13);
  static_assert(!std::is_same_v<verdict, rules::executor_splits_transaction>,
                COMMIT_ORDER_MESSAGE_R14);
  static_assert(!std::is_same_v<verdict, rules::out_of_order_needs_offset_guard>,
                COMMIT_ORDER_MESSAGE_R15);
  static_assert(!std::is_same_v<verdict, rules::retry_needs_idempotent_sink>,
                COMMIT_ORDER_MESSAGE_R16);

  using base = typename parts::base;

 public:
  using base::base;
};

}  // namespace commit_order
