// SPDX-License-Identifier: BSL-1.0
// What the partitioned crash tests share: a topic of several partitions whose events make a
// regression visible, the partitioned forms of the four sinks the matrix runs (the guarded ones
// partition-scoped, as rule R17 requires), and a journal of what became durable per partition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "crash/crash_support.hpp"

namespace crash {

using partitioned_event_log = co::memory::partitioned_log<account_event>;

/// The account an event of partition `k` updates: accounts never move between partitions (a
/// key that did would be `key_moved_partition`, an error of the stream, not of a crash).
inline std::int64_t account_of(co::partition_id k, std::int64_t a) {
  return static_cast<std::int64_t>(k.value()) * 1000 + a;
}

/// `per_partition` events on each of `partitions` partitions over `accounts` accounts each,
/// chosen by the same fixed LCG as the single-partition log.
inline partitioned_event_log make_partitioned_log(std::size_t partitions,
                                                  std::int64_t per_partition,
                                                  std::int64_t accounts) {
  partitioned_event_log log(partitions);
  std::map<std::int64_t, std::int64_t> next_seq;
  std::uint64_t x = 0x2545F4914F6CDD1DULL;
  for (std::size_t p = 0; p < partitions; ++p) {
    const co::partition_id k{static_cast<std::int32_t>(p)};
    for (std::int64_t i = 0; i < per_partition; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const std::int64_t a = account_of(
          k, static_cast<std::int64_t>((x >> 33) % static_cast<std::uint64_t>(accounts)));
      log.append(k, account_event{a, next_seq[a]++});
    }
  }
  return log;
}

// ---- the sinks, partitioned -------------------------------------------------------------------

/// Keyed upsert, last writer wins (no guard: nothing compares offsets). The same type as the
/// single-partition matrix's, as is the append table.
using p_idempotent_table = idempotent_table;
/// Keyed upsert that only wins with a newer source offset of the same partition.
using p_guarded_table =
    co::memory::table<account_event, account_key,
                      co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped>>;
/// The shared table: keyed, guarded per partition, positions per partition in its transaction.
using p_transactional_table = co::memory::table<
    account_event, account_key,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>>;
/// Plain append that declares a replay harmless.
using p_harmless_table = harmless_table;
/// Guarded by offsets alone: with a partitioned source, rule R17 refuses it.
using p_unscoped_guarded_table = guarded_table;

template <class Table>
inline constexpr sink_kind p_kind_of_v = [] {
  if constexpr (std::is_same_v<Table, p_idempotent_table>) {
    return sink_kind::idempotent;
  } else if constexpr (std::is_same_v<Table, p_guarded_table>) {
    return sink_kind::guarded;
  } else if constexpr (std::is_same_v<Table, p_transactional_table>) {
    return sink_kind::transactional;
  } else {
    static_assert(std::is_same_v<Table, p_harmless_table>);
    return sink_kind::harmless;
  }
}();

using all_partitioned_tables =
    type_list<p_idempotent_table, p_guarded_table, p_transactional_table, p_harmless_table>;

using partitioned_store = co::memory::position_store<>;

// ---- a journal of what became durable, per partition ------------------------------------------

struct partitioned_journal {
  std::map<co::partition_id, std::vector<int>> delivered;  ///< durable deliveries per offset
  std::map<co::partition_id, std::vector<int>> applied;    ///< of which the row took the record
  std::size_t absorbed = 0;
  std::size_t regressions = 0;  ///< a key's durable row went back to an older seq
  std::map<std::int64_t, std::int64_t> high_water;

  int& at(std::map<co::partition_id, std::vector<int>>& m, co::partition_id k, co::offset o) {
    std::vector<int>& v = m[k];
    const auto i = static_cast<std::size_t>(o.value());
    if (i >= v.size())
      v.resize(i + 1, 0);
    return v[i];
  }
  [[nodiscard]] int delivered_at(co::partition_id k, co::offset o) const {
    const auto it = delivered.find(k);
    const auto i = static_cast<std::size_t>(o.value());
    return it == delivered.end() || i >= it->second.size() ? 0 : it->second[i];
  }
  [[nodiscard]] int applied_at(co::partition_id k, co::offset o) const {
    const auto it = applied.find(k);
    const auto i = static_cast<std::size_t>(o.value());
    return it == applied.end() || i >= it->second.size() ? 0 : it->second[i];
  }
  void deliver(co::partition_id k, co::offset o, co::write_outcome out) {
    ++at(delivered, k, o);
    if (out == co::write_outcome::absorbed)
      ++absorbed;
    else
      ++at(applied, k, o);
  }
  void watch(std::int64_t account, std::int64_t seq_now) {
    auto [it, fresh] = high_water.try_emplace(account, seq_now);
    if (!fresh) {
      if (seq_now < it->second)
        ++regressions;
      else
        it->second = seq_now;
    }
  }
};

/// Forwards everything to a partitioned `Inner` and writes the journal: durable when apply
/// returns, or at commit inside a transaction, never when rolled back; after every durable
/// change it checks that no key's seq went backwards.
template <class Inner>
class partitioned_journal_sink {
  static constexpr bool tx = co::partitioned_transactional_sink<Inner>;

 public:
  using row_type = typename Inner::row_type;
  using key_type = typename Inner::key_type;
  using capabilities = typename Inner::capabilities;

  partitioned_journal_sink(Inner& inner, partitioned_journal& j) : inner_(&inner), journal_(&j) {}

  co::write_outcome apply(co::partition_id k, co::offset o, const row_type& row) {
    const co::write_outcome out = inner_->apply(k, o, row);
    if (in_tx_) {
      staged_.push_back(staged{k, o, out, row.account});
    } else {
      journal_->deliver(k, o, out);
      watch(row.account);
    }
    return out;
  }

  void begin() requires tx {
    inner_->begin();
    in_tx_ = true;
    staged_.clear();
  }
  void commit() requires tx {
    inner_->commit();
    in_tx_ = false;
    for (const staged& s : staged_) {
      journal_->deliver(s.k, s.o, s.out);
      watch(s.account);
    }
    staged_.clear();
  }
  void rollback() requires tx {
    inner_->rollback();
    in_tx_ = false;
    for (const staged& s : staged_)
      watch(s.account);
    staged_.clear();
  }
  void store_position(co::partition_id k, co::position p) requires tx {
    inner_->store_position(k, p);
  }
  void store_position(co::partition_id k, co::position p, co::epoch e) requires tx {
    inner_->store_position(k, p, e);
  }
  std::optional<co::position> claim(co::partition_id k, co::epoch e) requires tx {
    return inner_->claim(k, e);
  }
  co::claimed claim_next(co::partition_id k) requires tx { return inner_->claim_next(k); }
  std::optional<co::position> load_position(co::partition_id k) const requires tx {
    return inner_->load_position(k);
  }
  [[nodiscard]] std::int64_t era() const requires tx { return inner_->era(); }
  void check_partition_count(std::size_t n) requires tx { inner_->check_partition_count(n); }
  std::optional<co::offset> applied_watermark(co::partition_id k) const {
    return inner_->applied_watermark(k);
  }

 private:
  struct staged {
    co::partition_id k;
    co::offset o;
    co::write_outcome out;
    std::int64_t account;
  };

  void watch(std::int64_t account) {
    if constexpr (!std::is_same_v<key_type, co::no_key>) {
      if (const auto* r = inner_->find(account_key{}(account_event{account, 0})))
        journal_->watch(account, r->row.seq);
    }
  }

  Inner* inner_;
  partitioned_journal* journal_;
  std::vector<staged> staged_;
  bool in_tx_ = false;
};

}  // namespace crash
