// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/table.hpp — an in-memory table with declared capabilities.
//
// Part of the testing kit. Its behaviour follows the capabilities it is given, so one type
// models every sink the rules talk about:
//   Idempotent          rows are upserted by the event-derived key (otherwise: plain append);
//   OffsetGuarded       an upsert wins only if its source offset is newer than the row's;
//   PartitionScoped     rows carry their partition; the offset guard compares offsets of one
//                       partition only, and a key arriving from another partition than its
//                       row's is `key_moved_partition` — one table shared by many partitions;
//   VersionGuarded<&E::v> an upsert wins only if the event's per-key version is newer;
//   Transactional       begin/commit/rollback, with the positions stored in the same
//                       transaction, one per partition, each with its owner epoch;
//   a durability tag and MaxTransactionRows<N> are declared, not simulated;
//   a run-time transaction limit (set_max_transaction_rows) stands for a server setting.
// The single-partition calls (`apply(o, row)`, `load_position()`, `claim(e)`, ...) are the
// per-partition ones for partition 0. Like a real table it outlives the pipeline, which is
// what crash tests rely on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::memory {

/// A row as the table keeps it: the value, and the partition and source offset it came from.
template <class Row>
struct stored_row final {
  Row row;
  offset source_offset;
  partition_id source_partition{};
};

namespace detail {
template <class Caps>
struct version_member {
  static constexpr bool guarded = false;
};
template <class... Tags>
struct version_member<capabilities<Tags...>> {
  template <class T>
  struct of {
    static constexpr bool found = false;
  };
  template <auto M>
  struct of<VersionGuarded<M>> {
    static constexpr bool found = true;
    static constexpr auto member = M;
  };
  static constexpr bool guarded = (of<Tags>::found || ...);
  template <class Row>
  static constexpr bool newer(const Row& incoming, const Row& stored) {
    bool result = false;
    (check<Tags>(incoming, stored, result), ...);
    return result;
  }
  template <class Tag, class Row>
  static constexpr void check(const Row& incoming, const Row& stored, bool& result) {
    if constexpr (of<Tag>::found)
      result = stored.*(of<Tag>::member) < incoming.*(of<Tag>::member);
  }
};

template <class Caps>
inline constexpr bool guards_upsert =
    contains_capability_v<Caps, OffsetGuarded> || version_member<Caps>::guarded;
// What the table's checks ask (MM1, MM2, MM3).
template <class Key, class Caps>
inline constexpr bool upsert_has_key =
    !contains_capability_v<Caps, Idempotent> || !std::is_same_v<Key, no_key> ||
    contains_capability_v<Caps, AppendOnly>;  // MM3's
template <class Caps>
inline constexpr bool guard_has_upsert =
    !guards_upsert<Caps> || contains_capability_v<Caps, Idempotent> ||
    contains_capability_v<Caps, AppendOnly>;  // MM3's
template <class Caps>
inline constexpr bool append_only_keeps_rows =
    !contains_capability_v<Caps, AppendOnly> ||
    (!contains_capability_v<Caps, Idempotent> && !guards_upsert<Caps>);
/// Caps, with Idempotent added once MM2 refused a guard declared without it, and with every
/// upsert claim (Idempotent and the guards) dropped once MM3 refused them beside AppendOnly.
template <class Caps, bool Refused = !guard_has_upsert<Caps>,
          bool Appends = !append_only_keeps_rows<Caps>>
struct upsert_for_guard {
  using type = Caps;
};
template <class... Tags>
struct upsert_for_guard<capabilities<Tags...>, true, false> {
  using type = capabilities<Idempotent, Tags...>;
};
template <class Tag>
inline constexpr bool upsert_claim =
    std::is_same_v<Tag, Idempotent> || std::is_same_v<Tag, OffsetGuarded> ||
    version_member<capabilities<Tag>>::guarded;
template <class... Kept>
struct keep_tags {
  template <class Tag>
  using add = std::conditional_t<upsert_claim<Tag>, keep_tags, keep_tags<Kept..., Tag>>;
  using type = capabilities<Kept...>;
};
template <class List, class... Tags>
struct drop_upsert;
template <class List>
struct drop_upsert<List> {
  using type = typename List::type;
};
template <class List, class Tag, class... Tags>
struct drop_upsert<List, Tag, Tags...> : drop_upsert<typename List::template add<Tag>, Tags...> {};
template <class... Tags, bool Refused>
struct upsert_for_guard<capabilities<Tags...>, Refused, true> {
  using type = typename drop_upsert<keep_tags<>, Tags...>::type;
};
}  // namespace detail

// The table's checks (MM1, MM2, MM3) are its constraint, so they run where its type is named rather
// than deep in a pipeline's rules; each holds once reported.
template <class Row, class Key = no_key, class Caps = capabilities<Volatile>>
requires(part_rules::require<part_rules::memory_idempotent_without_key,
                             detail::upsert_has_key<Key, Caps>>() &&
         part_rules::require<part_rules::memory_guard_without_upsert,
                             detail::guard_has_upsert<Caps>>() &&
         part_rules::require<part_rules::memory_append_only_upsert,
                             detail::append_only_keeps_rows<Caps>>()) class table final {
  // Stand-ins once a check refused what the table was given, so that its message is the one
  // error: the upsert a guard needs (MM2), and a key for it (MM1).
  using checked_caps = typename detail::upsert_for_guard<Caps>::type;
  static constexpr bool keyed = contains_capability_v<checked_caps, Idempotent>;
  static constexpr bool offset_guarded = contains_capability_v<Caps, OffsetGuarded>;
  static constexpr bool version_guarded = detail::version_member<Caps>::guarded;
  static constexpr bool scoped = contains_capability_v<Caps, PartitionScoped>;
  static constexpr bool transactional = contains_capability_v<Caps, Transactional>;
  using upsert_key =
      std::conditional_t<keyed && std::is_same_v<Key, no_key>, part_rules::refused_key, Key>;

 public:
  using row_type = Row;
  using key_type = upsert_key;
  /// What the table was given; Volatile unless it names a durability of its own.
  using capabilities = with_default_durability_t<checked_caps, Volatile>;
  // A key that cannot be called with the row (a UUID generator) leaves a placeholder here, so
  // the table can still be named and judged: rule R8 reports the key, not this line.
  using key_value =
      typename std::conditional_t<keyed && std::is_invocable_v<const upsert_key&, const Row&>,
                                  std::invoke_result<const upsert_key&, const Row&>,
                                  std::type_identity<int>>::type;

  /// Applies one row of partition `k`.
  write_outcome apply(partition_id k, offset source_offset, const Row& row) {
    if constexpr (keyed) {
      auto key = upsert_key{}(row);
      auto it = keyed_.find(key);
      if (it != keyed_.end()) {
        const stored_row<Row>& now = it->second;
        if constexpr (version_guarded) {
          if (!detail::version_member<Caps>::newer(row, now.row))
            return write_outcome::absorbed;
        } else if constexpr (offset_guarded) {
          // Offsets of two partitions say nothing about which record is newer.
          if constexpr (scoped) {
            if (now.source_partition != k)
              throw key_moved_partition(key_text(key), now.source_partition, now.source_offset, k,
                                        source_offset);
          }
          if (!(now.source_offset < source_offset))
            return write_outcome::absorbed;
        }
      }
      if (in_tx_) {
        undo_.push_back(
            undo_entry{key, it == keyed_.end() ? std::nullopt : std::optional{it->second}});
      }
      if (it == keyed_.end()) {
        keyed_.emplace(std::move(key), stored_row<Row>{row, source_offset, k});
      } else {
        it->second = stored_row<Row>{row, source_offset, k};
      }
    } else {
      // Growth kept out of line: an allocating call inlined here gives the whole loop around
      // apply() an exception edge, and g++ then vectorises the row's copy from scalars
      // (measured: +5 instructions per row; docs/performance.md).
      if (appended_.size() == appended_.capacity()) [[unlikely]]
        grow();
      appended_.push_back(stored_row<Row>{row, source_offset, k});
    }
    if (in_tx_ && !watermarks_saved_) {
      watermarks_at_begin_.assign(watermarks_.begin(), watermarks_.end());
      watermarks_saved_ = true;
    }
    std::optional<offset>& w = watermark_of(k);
    if (!w || *w < source_offset)
      w = source_offset;
    return write_outcome::applied;
  }

  // ---- transactions (Transactional tables only) --------------------------------------------

  void begin() requires transactional {
    if (in_tx_)
      throw std::logic_error("memory::table: begin() inside an open transaction");
    in_tx_ = true;
    undo_.clear();
    appended_at_begin_ = appended_.size();
    watermarks_saved_ = false;
    staged_.clear();
    staged_partition_count_.reset();
  }

  void commit() requires transactional {
    if (!in_tx_)
      throw std::logic_error("memory::table: commit() without begin()");
    for (const staged_slot& s : staged_) {
      const partition_id k = s.partition;
      slot& target = position_slot(k);
      if (s.stored)
        target.stored = s.stored;
      if (s.owner)
        target.owner = *s.owner;
    }
    if (staged_partition_count_)
      partition_count_ = staged_partition_count_;
    staged_.clear();
    in_tx_ = false;
    undo_.clear();
    watermarks_saved_ = false;
    ++commits_;
  }

  void rollback() noexcept requires transactional {
    if (!in_tx_)
      return;
    if constexpr (keyed) {
      for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
        if (it->previous) {
          keyed_.insert_or_assign(it->k, *it->previous);
        } else {
          keyed_.erase(it->k);
        }
      }
    }
    appended_.resize(appended_at_begin_);
    if (watermarks_saved_)
      watermarks_.assign(watermarks_at_begin_.begin(), watermarks_at_begin_.end());
    watermarks_saved_ = false;
    in_tx_ = false;
    undo_.clear();
    staged_.clear();
    staged_partition_count_.reset();
  }

  // ---- positions, per partition, inside the transaction ------------------------------------

  void store_position(partition_id k, position p) requires transactional {
    require_transaction("store_position()");
    staged(k).stored = p;
  }

  [[nodiscard]] std::optional<position> load_position(partition_id k = partition_id{
                                                          0}) const requires transactional {
    const slot* found = find_slot(k);
    return found == nullptr ? std::nullopt : found->stored;
  }

  /// Fencing: raises partition `k`'s owner epoch to `e` (on commit) and returns its stored
  /// position, or throws `fenced` when a newer owner has claimed it.
  std::optional<position> claim(partition_id k, epoch e) requires transactional {
    require_transaction("claim()");
    const epoch now = current_owner(k);
    if (e < now)
      throw fenced(e, now, k);
    staged(k).owner = e;
    return load_position(k);
  }

  /// Fencing without an epoch of one's own: raises partition `k`'s owner epoch by one.
  claimed claim_next(partition_id k) requires transactional {
    require_transaction("claim_next()");
    const epoch e = current_owner(k).next();
    staged(k).owner = e;
    return claimed{e, load_position(k)};
  }

  /// Stages `p` only while `e` still owns partition `k`.
  void store_position(partition_id k, position p, epoch e) requires transactional {
    const epoch now = current_owner(k);
    if (e != now)
      throw fenced(e, now, k);
    store_position(k, p);
  }

  /// The epoch that owns partition `k`'s position row now (committed).
  [[nodiscard]] epoch owner(partition_id k = partition_id{0}) const noexcept {
    const slot* found = find_slot(k);
    return found == nullptr ? epoch{0} : found->owner;
  }

  // ---- what the owners of a stream share ---------------------------------------------------

  /// The stream's era (see epoch::of): raised only by `bump_era`, an operator's explicit act
  /// when a consumer group was deleted and recreated and its generations restarted.
  [[nodiscard]] std::int64_t era() const noexcept { return era_; }
  /// Outside a transaction (std::logic_error inside one: its rollback or commit would take the
  /// operator's act back), as the SQL sinks' operator calls are.
  void bump_era() {
    require_no_transaction("bump_era()");
    ++era_;
  }

  /// Records the stream's partition count at the first claim; a different count later is
  /// `partition_count_changed` (keys may have moved between partitions, and an offset guard
  /// would compare offsets of unrelated partitions). A version-guarded table records the new
  /// count instead: its guard does not depend on partitions.
  void check_partition_count(std::size_t n) requires transactional {
    require_transaction("check_partition_count()");
    if (partition_count_ == n)
      return;
    if (partition_count_ && !version_guarded)
      throw partition_count_changed(*partition_count_, n);
    staged_partition_count_ = n;
  }
  /// The partition count recorded at the first claim (none before it).
  [[nodiscard]] std::optional<std::size_t> partition_count() const noexcept {
    return partition_count_;
  }
  /// The operator's acknowledgement of a repartitioned stream (after draining the old
  /// partitions): the next claim records the count it sees. Outside a transaction.
  void accept_partition_count() {
    require_no_transaction("accept_partition_count()");
    partition_count_.reset();
  }
  /// The same, naming the new count: a claim that sees another one still fails under the
  /// offset guard (the version guard records whatever count a claim sees).
  void accept_partition_count(std::size_t n) {
    require_no_transaction("accept_partition_count(n)");
    partition_count_ = n;
  }

  /// A run-time transaction limit, as a server setting would impose (0: none).
  [[nodiscard]] std::size_t max_transaction_rows() const noexcept { return runtime_max_rows_; }
  void set_max_transaction_rows(std::size_t n) noexcept { runtime_max_rows_ = n; }

  // ---- what a test inspects ----------------------------------------------------------------

  /// Number of rows in the table.
  [[nodiscard]] std::size_t size() const noexcept {
    if constexpr (keyed) {
      return keyed_.size();
    } else {
      return appended_.size();
    }
  }

  /// The row stored under `k` (Idempotent tables).
  [[nodiscard]] const stored_row<Row>* find(const key_value& k) const requires keyed {
    auto it = keyed_.find(k);
    return it == keyed_.end() ? nullptr : &it->second;
  }

  /// Every row, in key order (Idempotent) or in append order.
  template <class F>
  void for_each(F&& f) const {
    if constexpr (keyed) {
      for (const auto& [k, r] : keyed_)
        f(r);
    } else {
      for (const auto& r : appended_)
        f(r);
    }
  }

  /// The applied watermark: the highest source offset present in the table (of any
  /// partition: meaningful for a table fed by one partition).
  [[nodiscard]] std::optional<offset> applied_watermark() const noexcept {
    std::optional<offset> w;
    for (const auto& [k, o] : watermarks_)
      if (o && (!w || *w < *o))
        w = o;
    return w;
  }
  /// The highest source offset of partition `k` present in the table.
  [[nodiscard]] std::optional<offset> applied_watermark(partition_id k) const noexcept {
    for (const auto& [id, o] : watermarks_)
      if (id == k)
        return o;
    return std::nullopt;
  }

  /// Committed transactions so far.
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }

 private:
  struct undo_entry {
    key_value k;
    std::optional<stored_row<Row>> previous;
  };
  struct slot {
    partition_id partition;
    std::optional<commit_order::position> stored;
    epoch owner{0};
  };
  struct staged_slot {
    partition_id partition;
    std::optional<commit_order::position> stored;
    std::optional<epoch> owner;
  };

  [[gnu::noinline, gnu::cold]] void grow() {
    appended_.reserve(std::max<std::size_t>(16, appended_.capacity() * 2));
  }

  // A few partitions at most feed one table: a linear search beats a map, and with one
  // partition it is one comparison per row.
  std::optional<offset>& watermark_of(partition_id k) {
    for (auto& [id, o] : watermarks_)
      if (id == k)
        return o;
    return watermarks_.emplace_back(k, std::nullopt).second;
  }

  const slot* find_slot(partition_id k) const noexcept {
    for (const slot& s : positions_)
      if (s.partition == k)
        return &s;
    return nullptr;
  }
  slot& position_slot(partition_id k) {
    for (slot& s : positions_)
      if (s.partition == k)
        return s;
    return positions_.emplace_back(slot{k, std::nullopt, epoch{0}});
  }

  staged_slot& staged(partition_id k) {
    for (staged_slot& s : staged_)
      if (s.partition == k)
        return s;
    return staged_.emplace_back(staged_slot{k, std::nullopt, std::nullopt});
  }

  // Inside the open transaction, the owner it staged wins over the committed one.
  epoch current_owner(partition_id k) const {
    for (const staged_slot& s : staged_)
      if (s.partition == k && s.owner)
        return *s.owner;
    return owner(k);
  }

  void require_transaction(const char* what) const {
    if (!in_tx_)
      throw std::logic_error(std::string("memory::table: ") + what + " outside a transaction");
  }
  void require_no_transaction(const char* what) const {
    if (in_tx_)
      throw std::logic_error(std::string("memory::table: ") + what +
                             " inside a transaction: an operator's act is not part of a unit "
                             "-- call it between units");
  }

  std::map<key_value, stored_row<Row>> keyed_;
  std::vector<stored_row<Row>> appended_;
  std::vector<undo_entry> undo_;
  std::vector<std::pair<partition_id, std::optional<offset>>> watermarks_;
  std::vector<std::pair<partition_id, std::optional<offset>>> watermarks_at_begin_;
  bool watermarks_saved_ = false;
  std::vector<slot> positions_;  // one per partition ever stored (a few: a linear search)
  // What the open transaction staged, per partition (a vector: cleared, never freed, so a unit
  // allocates nothing in the steady state).
  std::vector<staged_slot> staged_;
  std::optional<std::size_t> partition_count_;
  std::optional<std::size_t> staged_partition_count_;
  std::int64_t era_ = 0;
  std::size_t runtime_max_rows_ = 0;
  std::size_t appended_at_begin_ = 0;
  std::size_t commits_ = 0;
  bool in_tx_ = false;
};

}  // namespace commit_order::memory
