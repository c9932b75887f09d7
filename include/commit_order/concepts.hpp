// SPDX-License-Identifier: BSL-1.0
// commit_order/concepts.hpp — the shapes of sources, sinks and position stores.
//
// These say what the loop calls; the capability tags (capabilities.hpp) say what the calls
// guarantee. A type can satisfy a concept and still be rejected by a legality rule.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"

namespace commit_order {

/// The batch type a source's poll returns.
template <class S>
using batch_t = decltype(std::declval<S&>().poll(std::size_t{}));

namespace detail {
// std::ranges' range concepts, from ranges::begin, end and size and the iterator concepts alone
// (<iterator>): <ranges> adds the views and adaptors, which nothing here uses, to every
// translation unit. Each is defined as the standard defines its namesake.
template <class R>
using iterator_of = decltype(std::ranges::begin(std::declval<R&>()));
template <class R>
concept range = requires(R& r) {
  std::ranges::begin(r);
  std::ranges::end(r);
};
template <class R>
concept random_access_range = range<R> && std::random_access_iterator<iterator_of<R>>;
template <class R>
concept input_range = range<R> && std::input_iterator<iterator_of<R>>;
template <class R>
concept sized_range = range<R> && requires(R& r) {
  std::ranges::size(r);
};
template <range R>
using range_value_t = std::iter_value_t<iterator_of<R>>;

// The parts of the concepts below are named concepts of their own: clang-format 14 mangles a
// requires-expression joined to anything by && (`}\n&&std::...`), but not a conjunction of names.
template <class S>
concept source_calls = requires(S& s, const S& cs, position p, std::size_t n) {
  s.seek(p);
  { s.poll(n) } -> detail::random_access_range;
  { cs.earliest() } -> std::same_as<position>;
  { cs.end() } -> std::same_as<position>;
};
}  // namespace detail

/// Reads batches from a position. `seek` moves the read position; `poll(n)` returns up to n
/// records from there as a sized random-access range (the loop splits batches into units);
/// `earliest()` is the position of the first retained record and `end()` the position just past the
/// last one.
template <class S>
concept source = detail::source_calls<S> && detail::sized_range<batch_t<S>> &&
    record<detail::range_value_t<batch_t<S>>>;

namespace detail {
template <class S>
concept partitioned_source_calls = requires(S& s, const S& cs, partition_id k, position p,
                                            std::size_t n) {
  s.seek(k, p);
  { s.poll(n) } -> detail::random_access_range;
  { cs.earliest(k) } -> std::same_as<position>;
  { cs.end(k) } -> std::same_as<position>;
  { cs.partition_count() } -> std::convertible_to<std::size_t>;
  { cs.assignment() } -> detail::input_range;
};
}  // namespace detail

/// Reads batches from the partitions it owns now. `poll(n)` returns up to n records, each
/// carrying its partition (a `partitioned_record`), only of partitions in `assignment()`;
/// `seek(k, p)` moves partition k's read position; `earliest(k)` and `end(k)` are partition k's
/// first retained position and the position past its last record; `partition_count()` is the
/// number of partitions the stream has (owned or not). A single-partition `source` is the
/// special case of one partition, 0, always owned.
template <class S>
concept partitioned_source = detail::partitioned_source_calls<S> &&
    detail::sized_range<batch_t<S>> && partitioned_record<detail::range_value_t<batch_t<S>>>;

/// Either kind of source.
template <class S>
concept any_source = source<S> || partitioned_source<S>;

/// The record type of a source.
template <any_source S>
using source_record_t = detail::range_value_t<batch_t<S>>;

/// Where a partition starts after an assignment: exactly `at`, never the source's own idea.
struct start_at final {
  partition_id partition;
  position at;
};

/// How a group-managed source tells the pipeline, synchronously on the polling thread (inside
/// `poll`), that its assignment changed. Implemented by the pipeline, never by the user.
class assignment_listener {
 public:
  /// `partitions` are now this consumer's, at group generation `generation`. The pipeline
  /// claims them in one sink transaction and returns where each must start; the source starts
  /// each exactly there.
  virtual std::vector<start_at> assigned(std::span<const partition_id> partitions,
                                         std::int32_t generation) = 0;
  /// `partitions` are given up in an orderly rebalance: nothing is open for them when the
  /// pipeline returns, and records of them the source still buffers must be dropped.
  virtual void revoked(std::span<const partition_id> partitions) = 0;
  /// `partitions` were taken away (the session expired): nothing may be stored for them.
  virtual void lost(std::span<const partition_id> partitions) = 0;

 protected:
  assignment_listener() = default;
  assignment_listener(const assignment_listener&) = default;
  assignment_listener& operator=(const assignment_listener&) = default;
  ~assignment_listener() = default;
};

/// A partitioned source whose partitions a group coordinator assigns and takes away: it calls
/// the listener it was given inside `poll`, before it returns records of a new assignment.
template <class S>
concept group_managed_source = partitioned_source<S> && requires(S& s, assignment_listener& l) {
  s.listen(l);
};

/// What a sink reports for one row. A sink whose `apply` returns void counts as `applied`.
enum class write_outcome {
  applied,   ///< the row now reflects this record
  absorbed,  ///< the offset guard kept a newer row: a replay, absorbed
};

/// Writes rows derived from records: `apply(source_offset, row)`, or, for a sink whose rows
/// record their partition, `apply(partition, source_offset, row)`. Durable on return unless the
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
template <class S>
concept applies_const_partitioned_row = requires(S& s, partition_id k, offset o,
                                                 const typename S::row_type& row) {
  s.apply(k, o, row);
};
}  // namespace detail

template <class S>
concept sink = detail::declares_row_type<S> &&
    (detail::applies_const_row<S> || detail::applies_const_partitioned_row<S>);

/// A sink whose apply() hands a row over and whose flush() returns once every row handed over
/// since the last flush is durable at the sink's declared level, or throws (a producer waiting
/// for its acknowledgements). The pipeline calls flush() at the end of each unit's write step
/// outside a sink transaction, before the position may pass the unit's rows.
template <class S>
concept flushing_sink = sink<S> && requires(S& s) {
  s.flush();
};

namespace detail {
/// S has a public member named flush, whatever its shape (not an overload set or a template):
/// rule S30 refuses one the loop cannot call as flush().
template <class S>
concept names_flush = requires {
  &S::flush;
};
}  // namespace detail

/// The row type a sink accepts.
template <sink S>
using sink_row_t = typename S::row_type;

/// A sink whose rows record the partition they came from: `apply(partition, offset, row)`.
/// A PartitionScoped or VersionGuarded sink fed by a partitioned source must be one.
template <class S>
concept partitioned_sink = sink<S> &&
    requires(S& s, partition_id k, offset o, const typename S::row_type& row) {
  s.apply(k, o, row);
};

/// What a fresh claim (`claim_next`) took: the epoch it raised the position row to, and the
/// position stored there.
struct claimed final {
  epoch owner;
  std::optional<position> stored;
};

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
/// throws `fenced` when a newer owner holds it; `claim_next()` raises it by one (the epoch of a
/// consumer that was given none: the last one started wins, and the one before is fenced at
/// its next position write); `store_position(p, e)` stages `p` only while the owner epoch is
/// still `e`, and throws `fenced` otherwise.
template <class S>
concept fencing_sink = transactional_sink<S> && requires(S& s, position p, epoch e) {
  { s.claim(e) } -> std::same_as<std::optional<position>>;
  { s.claim_next() } -> std::same_as<claimed>;
  s.store_position(p, e);
};

/// A transactional sink that keeps one position per partition in its transaction.
template <class S>
concept partitioned_transactional_sink = sink<S> && requires(S& s, partition_id k, position p) {
  s.begin();
  s.commit();
  s.rollback();
  s.store_position(k, p);
  { s.load_position(k) } -> std::same_as<std::optional<position>>;
};

/// A partitioned transactional sink whose position rows carry the owner's epoch, per partition:
/// `claim(k, e)` raises partition k's owner epoch to e or throws `fenced`; `claim_next(k)`
/// raises it by one (a consumer with no epoch of its own: the last one started wins);
/// `store_position(k, p, e)` stages p only while k is still owned at e.
template <class S>
concept partitioned_fencing_sink = partitioned_transactional_sink<S> &&
    requires(S& s, partition_id k, position p, epoch e) {
  { s.claim(k, e) } -> std::same_as<std::optional<position>>;
  { s.claim_next(k) } -> std::same_as<claimed>;
  s.store_position(k, p, e);
};

/// What a stream's owners share beside positions, kept by the sink: the era (raised only by an
/// operator, when a consumer group was deleted and recreated and its generations restarted)
/// and the partition count recorded at the first claim (`partition_count_changed` otherwise).
template <class S>
concept stream_registry = requires(S& s, std::size_t n) {
  { s.era() } -> std::convertible_to<std::int64_t>;
  s.check_partition_count(n);
};

/// A source that can say what it is, stably across restarts (a topic, and the group that reads
/// it): a sink's stored positions are bound to it, so that a position stored for one source is
/// never taken for another's.
template <class S>
concept identified_source = requires(const S& s) {
  { s.identity() } -> std::convertible_to<std::string>;
};

/// A sink whose stored positions are bound to what they vouch for; the pipeline tells it the
/// source's identity before its first claim.
template <class S>
concept source_bound_sink = requires(S& s, const std::string& identity) {
  s.bind_source(identity);
};

/// A sink that names the data table its records' positions vouch for: a position store of the
/// pipeline is bound to it as well as to the source (bound_store).
template <class S>
concept table_bound_sink = requires(const S& s) {
  { s.bound_table() } -> std::convertible_to<std::string>;
};

/// A table_bound_sink that also names the database its table is in (a file, a database of a
/// server): a position store kept in another database is bound to the table *of that
/// database*, so two sinks' tables of one name in two databases never share a store's position.
template <class S>
concept database_bound_sink = table_bound_sink<S> && requires(const S& s) {
  { s.bound_database() } -> std::convertible_to<std::string>;
};

/// A position store whose stored positions are bound to what they vouch for: the pipeline
/// tells it the sink's data table and the source's identity (either empty when not named)
/// before recovery, and the store refuses a position stored for another table or source. A
/// store may also take the sink's database (`bind_to(table, identity, database)`), and name it
/// in the binding when it is not the store's own.
template <class S>
concept bound_store = requires(S& s, const std::string& table, const std::string& identity) {
  s.bind_to(table, identity);
};

/// A sink that can report its applied watermark: the highest source offset present in it.
template <class S>
concept watermarked_sink = requires(const S& s) {
  { s.applied_watermark() } -> std::same_as<std::optional<offset>>;
};

/// The same, per partition (a table shared by several partitions).
template <class S>
concept partitioned_watermarked_sink = requires(const S& s, partition_id k) {
  { s.applied_watermark(k) } -> std::same_as<std::optional<offset>>;
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

/// A position store that keeps one position per partition: `commit(k, p)`, `load(k)`.
template <class S>
concept partitioned_position_store = requires(S& s, partition_id k, position p) {
  { s.load(k) } -> std::same_as<std::optional<position>>;
  s.commit(k, p);
};

/// A per-partition position store that commits a unit's positions over several partitions in
/// one request, all or none (Kafka's offset commit): `commit(span<const start_at>)`. The
/// pipeline then never leaves a unit committed in one partition and not in another.
template <class S>
concept batch_position_store = partitioned_position_store<S> &&
    requires(S& s, std::span<const start_at> positions) {
  s.commit(positions);
};

/// A position store whose commit may be refused for a reason of the world that passes (a
/// consumer group rebalancing) declares `static constexpr bool interruptible_commits = true;`
/// and throws an exception that is also a `commit_interrupted` (errors.hpp). The pipeline
/// compiles its handling of that refusal only for such a store.
template <class S>
inline constexpr bool interruptible_commits_v = requires {
  requires S::interruptible_commits;
};

/// A source that can tell one record from another at the same offset: `fingerprint(record)`
/// and `fingerprint_at(offset)` (none when the offset is not retained) agree for the same
/// record. With a store that keeps a fingerprint beside the position, recovery refuses to
/// resume after a record that is not the one the position was committed after
/// (`offset_reused`): a source that lost records and reused their offsets.
template <class S>
concept fingerprinted_source = requires(S& s, const source_record_t<S>& r, offset o) {
  { s.fingerprint(r) } -> std::same_as<std::uint64_t>;
  { s.fingerprint_at(o) } -> std::same_as<std::optional<std::uint64_t>>;
};

/// A position store that keeps the fingerprint of the record a position was committed after:
/// `commit(p, fingerprint)`, `load_fingerprint()` (none when the last commit carried none).
template <class S>
concept fingerprint_store = requires(S& s, position p, std::uint64_t f) {
  s.commit(p, f);
  { s.load_fingerprint() } -> std::same_as<std::optional<std::uint64_t>>;
};

/// A source that can tell one record from another at the same offset (a topic deleted and
/// recreated under its name reuses every offset): `keep_fingerprints()` (from then on each
/// record polled has one), `fingerprint(record)` (of a record of the last poll), and
/// `expect_before(k, p, f)` — `expect_before(p, f)` for a single-partition source: the next
/// start of partition `k` at `p` first reads the record at `p - 1` and, when it is there and its
/// fingerprint is not `f`, fails with `offset_reused` instead of reading on (the record itself
/// is never handed out).
template <class S>
concept fingerprinted_start_source = requires(S& s, const source_record_t<S>& r) {
  s.keep_fingerprints();
  { s.fingerprint(r) } -> std::same_as<std::uint64_t>;
}
&&(partitioned_source<S>
       ? requires(S& s, partition_id k, position p, std::uint64_t f) { s.expect_before(k, p, f); }
       : requires(S& s, position p, std::uint64_t f) { s.expect_before(p, f); });

/// Offsets past a position that will never hold a record, as a source knows them: a
/// transaction's control marker and an aborted transaction's records take offsets that a
/// read_committed consumer never receives. Everything from the position asked about up to `end`
/// is such offsets.
struct gap {
  position end;
};

/// A source that can tell where a partition's next record can come from at the earliest, when
/// that lies past the next offset: `gap_after(k, p)` (`gap_after(p)` for a single-partition
/// source), asked with `p` the position after the last record it handed out, answers the gap
/// that starts at `p`, or nothing. The pipeline moves an idle partition's read position over
/// it (and, where no fingerprint would be lost, its durable position), so that progress never
/// counts offsets no poll will ever return as records still to read.
template <class S>
concept gap_reporting_source =
    (partitioned_source<S> ? requires(const S& s, partition_id k, position p) {
      { s.gap_after(k, p) } -> std::same_as<std::optional<gap>>;
    }
                           : requires(const S& s, position p) {
                               { s.gap_after(p) } -> std::same_as<std::optional<gap>>;
                             });

/// A fencing sink that keeps, beside each partition's position, the fingerprint of the record
/// the position was stored after: `store_position(k, p, e, f)`, and `claimed_fingerprint()`,
/// the one stored with the position the last `claim` or `claim_next` returned (none when it
/// was stored without one).
template <class S>
concept fingerprinting_sink = partitioned_fencing_sink<S> &&
    requires(S& s, const S& cs, partition_id k, position p, epoch e, std::uint64_t f) {
  s.store_position(k, p, e, f);
  { cs.claimed_fingerprint() } -> std::same_as<std::optional<std::uint64_t>>;
};

/// A per-partition position store that keeps, beside each position, the fingerprint of the
/// record it follows: `commit(k, p, f)`, and `loaded_fingerprint()`, the one stored with the
/// position the last `load` returned (none when it was stored without one).
template <class S>
concept fingerprinting_position_store = partitioned_position_store<S> &&
    requires(S& s, const S& cs, partition_id k, position p, std::uint64_t f) {
  s.commit(k, p, f);
  { cs.loaded_fingerprint() } -> std::same_as<std::optional<std::uint64_t>>;
};

/// Either kind of store.
template <class S>
concept any_position_store = position_store<S> || partitioned_position_store<S>;

/// A dead-letter sink told each record's partition: `put(partition, source_offset, event,
/// reason)`. The pipeline calls this form when the sink has it (a partitioned source's offsets
/// name a record only with their partition).
template <class D, class Event>
concept partitioned_dead_letter_sink = requires(D& d, partition_id k, offset o, const Event& e,
                                                const char* reason) {
  d.put(k, o, e, reason);
};

/// Where records that failed for good go: `put(source_offset, event, reason)` (or the
/// partitioned form) is durable on return, at the sink's declared durability level (or, for
/// letters declaring CommitsWithSink, with the sink's commit that passes the record: R21). A letter
/// is keyed by its record, (partition, offset): a replay that gives up on the same record again
/// -- after a crash between the letter and the unit's commit -- must not add a second one.
template <class D, class Event>
concept dead_letter_sink = partitioned_dead_letter_sink<D, Event> ||
    requires(D& d, offset o, const Event& e, const char* reason) {
  d.put(o, e, reason);
};

/// L gives the key and value bytes a dead letter of an Event keeps (none: a null key or value):
///   static std::optional<std::vector<std::byte>> key(const Event&);
///   static std::optional<std::vector<std::byte>> value(const Event&);
/// kafka::letter_bytes<Codec> is the one for Kafka's decoded events.
template <class L, class Event>
concept letter_format = requires(const Event& e) {
  { L::key(e) } -> std::same_as<std::optional<std::vector<std::byte>>>;
  { L::value(e) } -> std::same_as<std::optional<std::vector<std::byte>>>;
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
