// SPDX-License-Identifier: BSL-1.0
// commit_order/concepts.hpp — the shapes of sources, sinks and position stores.
//
// These say what the loop calls; the capability tags (capabilities.hpp) say what the calls
// guarantee. A type can satisfy a concept and still be rejected by a legality rule.
#pragma once

#include <concepts>
#include <cstddef>
#include <optional>
#include <ranges>
#include <utility>

#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"

namespace commit_order {

/// The batch type a source's poll returns.
template <class S>
using batch_t = decltype(std::declval<S&>().poll(std::size_t{}));

// The parts of the concepts below are named concepts of their own: clang-format 14 mangles a
// requires-expression joined to anything by && (`}\n&&std::...`), but not a conjunction of names.
namespace detail {
template <class S>
concept source_calls = requires(S& s, const S& cs, position p, std::size_t n) {
  s.seek(p);
  { s.poll(n) } -> std::ranges::random_access_range;
  { cs.earliest() } -> std::same_as<position>;
  { cs.end() } -> std::same_as<position>;
};
}  // namespace detail

/// Reads batches from a position. `seek` moves the read position; `poll(n)` returns up to n
/// records from there as a sized random-access range (the loop splits batches into units);
/// `earliest()` is the position of the first retained record and `end()` the position just past the
/// last one.
template <class S>
concept source = detail::source_calls<S> && std::ranges::sized_range<batch_t<S>> &&
    record<std::ranges::range_value_t<batch_t<S>>>;

/// The record type of a source.
template <source S>
using source_record_t = std::ranges::range_value_t<batch_t<S>>;

/// What a sink reports for one row. A sink whose `apply` returns void counts as `applied`.
enum class write_outcome {
  applied,   ///< the row now reflects this record
  absorbed,  ///< the offset guard kept a newer row: a replay, absorbed
};

/// Writes rows derived from records: `apply(source_offset, row)`. Durable on return unless the
/// sink is inside a transaction it opened with `begin()`.
namespace detail {
template <class S>
concept declares_row_type = requires {
  typename S::row_type;
};
template <class S>
concept applies_const_row = requires(S& s, offset o, const typename S::row_type& row) {
  s.apply(o, row);
};
}  // namespace detail

template <class S>
concept sink = detail::declares_row_type<S> && detail::applies_const_row<S>;

/// The row type a sink accepts.
template <sink S>
using sink_row_t = typename S::row_type;

/// A sink whose transactions can also hold the consumer's position. `load_position()` reads
/// the stored position (none before the first commit); `store_position(p)` stages it inside the
/// open transaction.
template <class S>
concept transactional_sink = sink<S> && requires(S& s, position p) {
  s.begin();
  s.commit();
  s.rollback();
  s.store_position(p);
  { s.load_position() } -> std::same_as<std::optional<position>>;
};

/// A transactional sink whose position row carries the owner's epoch. `claim(e)`, inside an
/// open transaction, raises the stored owner epoch to `e` and returns the stored position, or
/// throws `fenced` when a newer owner holds it; `store_position(p, e)` stages `p` only while
/// the owner epoch is still `e`, and throws `fenced` otherwise.
template <class S>
concept fencing_sink = transactional_sink<S> && requires(S& s, position p, epoch e) {
  { s.claim(e) } -> std::same_as<std::optional<position>>;
  s.store_position(p, e);
};

/// A sink that can report its applied watermark: the highest source offset present in it.
template <class S>
concept watermarked_sink = requires(const S& s) {
  { s.applied_watermark() } -> std::same_as<std::optional<offset>>;
};

/// A sink whose transaction size limit is known only at run time (a server setting).
template <class S>
concept runtime_limited_sink = requires(const S& s) {
  { s.max_transaction_rows() } -> std::convertible_to<std::size_t>;
};

/// Where a non-transactional policy keeps its position (the broker, a file, a table).
/// `commit(p)` is durable on return at the store's declared durability level.
template <class S>
concept position_store = requires(S& s, position p) {
  { s.load() } -> std::same_as<std::optional<position>>;
  s.commit(p);
};

/// Where records that failed for good go: `put(source_offset, event, reason)` is durable on
/// return, at the sink's declared durability level.
template <class D, class Event>
concept dead_letter_sink = requires(D& d, offset o, const Event& e, const char* reason) {
  d.put(o, e, reason);
};

namespace detail {
/// What the pipeline hands an executor: a copyable task, called once with no arguments. A
/// stand-in, so that checking an executor does not make every translation unit include
/// <functional>; an `execute(std::function<void()>)` accepts it as it accepts the real task.
struct task_archetype final {
  void operator()() const;  // never defined: only named in requires-expressions
};
}  // namespace detail

/// Runs tasks handed to it, on threads of its own: `execute(std::function<void()>)`.
template <class E>
concept executor = requires(E& e, detail::task_archetype task) {
  e.execute(std::move(task));
};

/// The marker for "no separate position store" (TransactionalPosition keeps it in the sink).
struct no_position_store final {};

}  // namespace commit_order
