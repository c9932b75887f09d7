// SPDX-License-Identifier: BSL-1.0
// What the crash tests share: the four kinds of sink the crash matrix and the random schedules
// run, as the testing kit's memory fixtures (tests/conformance/memory_fixture.hpp) over one
// partition and over two; the legality table they must agree with, written out by hand; and
// the size the crash tests run the kit at.
//
// The oracle is the testing kit's (include/commit_order/testing/): its crash matrix holds every
// crash to a reference computed from the log and the policy's own step list, and its random
// schedules to the guarantee. The crash tests run it over the library's own memory parts, with
// more records, batch sizes, clock patterns and schedules than an adapter's run, and assert
// what each policy is known to do.
#pragma once

#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>
#include <commit_order/testing/conformance.hpp>

#include "conformance/kit_event.hpp"
#include "conformance/memory_fixture.hpp"

namespace crash {

namespace co = commit_order;
namespace ct = commit_order::testing;
using conformance::kit_event;
using conformance::kit_key;

// ---- the sinks --------------------------------------------------------------------------------

enum class sink_kind { idempotent, guarded, transactional, harmless, transactional_log };

inline const char* name_of(sink_kind k) {
  switch (k) {
    case sink_kind::idempotent:
      return "idempotent";
    case sink_kind::guarded:
      return "idempotent+offset-guarded";
    case sink_kind::transactional:
      return "transactional+offset-guarded";
    case sink_kind::harmless:
      return "duplicates-harmless append";
    case sink_kind::transactional_log:
      return "transactional append-only log";
  }
  return "?";
}

/// Keyed upsert, last writer wins.
using idempotent_caps = co::capabilities<co::Idempotent>;
/// Keyed upsert that only wins with a newer source offset.
using guarded_caps = co::capabilities<co::Idempotent, co::OffsetGuarded>;
/// Keyed, guarded, with the position in the same transaction.
using transactional_caps = co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional>;
/// Plain append that declares a replay harmless (a set of tombstones, say): duplicates are
/// allowed, counted by offset.
using harmless_caps = co::capabilities<co::DuplicatesHarmless>;
/// Over a partitioned source the guarded sinks compare offsets within a partition only (R17).
using p_guarded_caps = co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped>;
using p_transactional_caps =
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>;

/// The single-partition fixtures: a memory::log, the table, a memory::position_store.
using idempotent_fixture = conformance::memory_fixture<idempotent_caps>;
using guarded_fixture = conformance::memory_fixture<guarded_caps>;
using transactional_fixture = conformance::memory_fixture<transactional_caps>;
using harmless_fixture = conformance::memory_fixture<harmless_caps, co::no_key>;
/// A transactional log, memory::transactional_log (a topic as its read_committed reader sees
/// it): it appends, unkeyed and unguarded, and its position commits with its rows. Counted by
/// offset: a duplicate is a failure unless the guarantee admits it. The kit also reads its
/// read_uncommitted view (its transactional-log section).
using log_fixture = conformance::transactional_log_fixture;

/// The fixtures over a 2-partition topic, a consumer assigned both partitions.
inline constexpr std::size_t matrix_partitions = 2;
template <class Caps, class Key = kit_key>
using two_partitions = conformance::partitioned_memory_fixture<Caps, matrix_partitions, Key>;
using p_idempotent_fixture = two_partitions<idempotent_caps>;
using p_guarded_fixture = two_partitions<p_guarded_caps>;
using p_transactional_fixture = two_partitions<p_transactional_caps>;
using p_harmless_fixture = two_partitions<harmless_caps, co::no_key>;
using p_log_fixture = conformance::partitioned_transactional_log_fixture<matrix_partitions>;
/// Guarded by offsets alone: with a partitioned source, rule R17 refuses them.
using p_unscoped_guarded_fixture = two_partitions<guarded_caps>;
using p_unscoped_transactional_fixture = two_partitions<transactional_caps>;

using all_fixtures = ct::detail::type_list<idempotent_fixture, guarded_fixture,
                                           transactional_fixture, harmless_fixture, log_fixture>;
using all_partitioned_fixtures =
    ct::detail::type_list<p_idempotent_fixture, p_guarded_fixture, p_transactional_fixture,
                          p_harmless_fixture, p_log_fixture>;

template <class F>
inline constexpr sink_kind kind_of_v = [] {
  using caps = typename F::sink_type::capabilities;
  if constexpr (co::contains_capability_v<caps, co::AppendOnly>) {
    static_assert(co::contains_capability_v<caps, co::Transactional>);
    return sink_kind::transactional_log;
  } else if constexpr (co::contains_capability_v<caps, co::Transactional>) {
    return sink_kind::transactional;
  } else if constexpr (co::contains_capability_v<caps, co::OffsetGuarded>) {
    return sink_kind::guarded;
  } else if constexpr (co::contains_capability_v<caps, co::Idempotent>) {
    return sink_kind::idempotent;
  } else {
    static_assert(co::contains_capability_v<caps, co::DuplicatesHarmless>);
    return sink_kind::harmless;
  }
}();

// ---- policies and triggers, by name ---------------------------------------------------------

enum class policy_kind { at_most_once, at_least_once, transactional_position };
enum class trigger_kind { every_record, every_batch, auto_commit };

template <class P>
inline constexpr policy_kind policy_kind_of_v = [] {
  if constexpr (std::is_same_v<P, co::AtMostOnce<typename P::trigger>>) {
    return policy_kind::at_most_once;
  } else if constexpr (std::is_same_v<P, co::AtLeastOnce<typename P::trigger>>) {
    return policy_kind::at_least_once;
  } else {
    static_assert(std::is_same_v<P, co::TransactionalPosition<typename P::trigger>>);
    return policy_kind::transactional_position;
  }
}();

template <class P>
inline constexpr trigger_kind trigger_kind_of_v = [] {
  if constexpr (std::is_same_v<typename P::trigger, co::EveryRecord>) {
    return trigger_kind::every_record;
  } else if constexpr (std::is_same_v<typename P::trigger, co::EveryBatch>) {
    return trigger_kind::every_batch;
  } else {
    return trigger_kind::auto_commit;
  }
}();

/// The legality table (R1-R5, docs/legality.md), written out by hand for the five sinks: the set
/// the crash tests must run. It is compared with what `can_make_pipeline` accepts, so a rule that
/// drifts from the design shows up as a mismatch, not as a silently smaller matrix.
constexpr bool design_allows(policy_kind p, trigger_kind t, sink_kind s) {
  const bool idempotent = s != sink_kind::harmless && s != sink_kind::transactional_log;
  const bool guarded = s == sink_kind::guarded || s == sink_kind::transactional;
  const bool transactional = s == sink_kind::transactional || s == sink_kind::transactional_log;
  const bool appends = s == sink_kind::transactional_log;
  const bool harmless = s == sink_kind::harmless;
  if (t == trigger_kind::auto_commit && p != policy_kind::at_most_once)
    return false;  // R2
  if (t == trigger_kind::auto_commit && !idempotent)
    return false;  // R1
  if (p == policy_kind::at_least_once && !idempotent && !harmless)
    return false;  // R3
  if (p == policy_kind::transactional_position && !transactional)
    return false;  // R4
  if (p == policy_kind::transactional_position && !guarded && !appends)
    return false;  // R5: an append-only log overwrites nothing
  return true;
}

// ---- the size of the runs ---------------------------------------------------------------------

/// The crash matrix: 30 records over 5 keys (15 per partition over 3 keys each on two), batch
/// sizes 1, 7 and 512, split limit none or 3 (each with every batch size and trigger, whether
/// or not it cuts the units differently), and under AutoCommit the clock moving one interval
/// every 1st, 2nd, 3rd, 5th or 8th fault point.
inline ct::conformance_options matrix_options(bool partitioned) {
  ct::conformance_options o;
  o.matrix_records = partitioned ? 15 : 30;
  o.matrix_keys = partitioned ? 3 : 5;
  o.matrix_batches = {1, 7, 512};
  o.matrix_splits = {0, 3};
  o.redundant_splits = true;
  o.clock_patterns = {1, 2, 3, 5, 8};
  return o;
}

}  // namespace crash
