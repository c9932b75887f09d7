// SPDX-License-Identifier: BSL-1.0
// A table several consumers share, each through its own session with its own transaction —
// what a database does for the members of a consumer group, which memory::table (one
// transaction at a time, one thread) cannot. Rows are keyed by order, carry their partition and
// offset (PartitionScoped, OffsetGuarded); positions and owner epochs are kept per partition;
// the era and the partition count are the stream's.
//
// A session's writes stay in the session until commit, which checks under the table's lock
// what a database's row locks and conditional UPDATEs check: a claim commits only if no higher
// owner committed since, a position only while its epoch still owns the partition. Either
// refusal is `fenced`, and nothing of the transaction lands.
//
// For reconciliation it keeps every committed write (partition, offset, epoch, session) in
// commit order, and every owner epoch committed per partition.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <commit_order/commit_order.hpp>

namespace kafka_test {

namespace co = commit_order;

/// The event of the Kafka tests: an order's update. An order always comes from one partition.
struct order final {
  std::int64_t order_id = 0;
  std::int64_t seq = 0;  ///< 1, 2, ... per order, in the order the producer sent them
  std::int64_t total = 0;
  friend bool operator==(const order&, const order&) = default;
};

template <class Durability = co::Volatile>
class shared_table final {
 public:
  struct row {
    order event;
    co::partition_id partition;
    co::offset at;
  };
  /// One committed write.
  struct applied {
    co::partition_id partition;
    co::offset at;
    co::epoch owner;
    int session;
  };

  class session;

  void bump_era() {
    std::lock_guard lock(m_);
    ++era_;
  }
  [[nodiscard]] std::int64_t era() const {
    std::lock_guard lock(m_);
    return era_;
  }
  [[nodiscard]] std::map<std::int64_t, row> rows() const {
    std::lock_guard lock(m_);
    return rows_;
  }
  [[nodiscard]] std::vector<applied> history() const {
    std::lock_guard lock(m_);
    return history_;
  }
  [[nodiscard]] std::optional<co::position> position(co::partition_id k) const {
    std::lock_guard lock(m_);
    const auto it = positions_.find(k);
    return it == positions_.end() ? std::nullopt : it->second.stored;
  }
  [[nodiscard]] co::epoch owner(co::partition_id k) const {
    std::lock_guard lock(m_);
    const auto it = positions_.find(k);
    return it == positions_.end() ? co::epoch{0} : it->second.owner;
  }
  /// Every owner epoch committed for partition k, in commit order.
  [[nodiscard]] std::vector<co::epoch> owners(co::partition_id k) const {
    std::lock_guard lock(m_);
    std::vector<co::epoch> out;
    for (const auto& [p, e] : owner_history_)
      if (p == k)
        out.push_back(e);
    return out;
  }
  /// Writes that found a newer (or the same) row already there: replays, absorbed.
  [[nodiscard]] std::size_t absorbed() const {
    std::lock_guard lock(m_);
    return absorbed_;
  }
  /// Writes a position as an operator would (to set up a test).
  void set_position(co::partition_id k, co::position p, co::epoch owner) {
    std::lock_guard lock(m_);
    positions_[k] = slot{p, owner};
  }

 private:
  struct slot {
    std::optional<co::position> stored;
    co::epoch owner{0};
  };

  mutable std::mutex m_;
  std::map<std::int64_t, row> rows_;
  std::map<co::partition_id, slot> positions_;
  std::map<co::partition_id, co::offset> watermarks_;
  std::optional<std::size_t> partition_count_;
  std::int64_t era_ = 0;
  std::vector<applied> history_;
  std::vector<std::pair<co::partition_id, co::epoch>> owner_history_;
  std::size_t absorbed_ = 0;
  int sessions_ = 0;
};

/// One consumer's connection to a shared_table: the pipeline's sink.
template <class Durability>
class shared_table<Durability>::session final {
 public:
  using row_type = order;
  using key_type = co::key<&order::order_id>;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped,
                                        co::Transactional, Durability>;

  explicit session(shared_table& t) : t_(&t) {
    std::lock_guard lock(t.m_);
    id_ = ++t.sessions_;
  }

  co::write_outcome apply(co::offset o, const order& r) { return apply(co::partition_id{0}, o, r); }

  co::write_outcome apply(co::partition_id k, co::offset o, const order& r) {
    const bool own_tx = !in_tx_;
    if (own_tx)
      begin();
    co::write_outcome outcome = co::write_outcome::applied;
    {
      std::lock_guard lock(t_->m_);
      const row* current = nullptr;
      if (const auto s = staged_rows_.find(r.order_id); s != staged_rows_.end())
        current = &s->second;
      else if (const auto c = t_->rows_.find(r.order_id); c != t_->rows_.end())
        current = &c->second;
      if (current != nullptr) {
        if (current->partition != k)
          throw co::key_moved_partition(std::to_string(r.order_id), current->partition, current->at,
                                        k, o);
        if (!(current->at < o)) {
          outcome = co::write_outcome::absorbed;
          ++t_->absorbed_;
        }
      }
      if (outcome == co::write_outcome::applied) {
        staged_rows_[r.order_id] = row{r, k, o};
        staged_writes_.push_back(row{r, k, o});
      }
    }
    if (own_tx)
      commit();
    return outcome;
  }

  void begin() {
    if (in_tx_)
      throw std::logic_error("shared_table: begin() inside a transaction");
    in_tx_ = true;
    clear();
  }

  void commit() {
    if (!in_tx_)
      throw std::logic_error("shared_table: commit() without begin()");
    std::lock_guard lock(t_->m_);
    // What row locks and conditional updates would have refused, checked against what other
    // sessions committed since this transaction began.
    for (const auto& [k, e] : staged_owner_) {
      const co::epoch now = committed_owner(k);
      if (e < now)
        throw co::fenced(e, now, k);
    }
    for (const auto& [k, s] : staged_positions_) {
      if (!s.owner)
        continue;
      const auto claimed = staged_owner_.find(k);
      const co::epoch now = claimed != staged_owner_.end() ? claimed->second : committed_owner(k);
      if (*s.owner != now)
        throw co::fenced(*s.owner, now, k);
    }
    for (const row& r : staged_writes_) {
      const auto c = t_->rows_.find(r.event.order_id);
      if (c != t_->rows_.end() && !(c->second.at < r.at)) {
        ++t_->absorbed_;  // a newer row committed since: the guard absorbs this one
        continue;
      }
      t_->rows_[r.event.order_id] = r;
      auto& w = t_->watermarks_[r.partition];
      if (w < r.at)
        w = r.at;
      t_->history_.push_back(applied{r.partition, r.at, epoch_for(r.partition), id_});
    }
    for (const auto& [k, e] : staged_owner_) {
      t_->positions_[k].owner = e;
      t_->owner_history_.emplace_back(k, e);
    }
    for (const auto& [k, s] : staged_positions_)
      t_->positions_[k].stored = s.at;
    if (staged_count_)
      t_->partition_count_ = staged_count_;
    in_tx_ = false;
    clear();
    ++commits_;
  }

  void rollback() noexcept {
    in_tx_ = false;
    clear();
  }

  void store_position(co::partition_id k, co::position p) {
    require_tx("store_position");
    staged_positions_[k] = staged_position{p, std::nullopt};
  }

  void store_position(co::partition_id k, co::position p, co::epoch e) {
    require_tx("store_position");
    {
      std::lock_guard lock(t_->m_);
      const auto claimed = staged_owner_.find(k);
      const co::epoch now = claimed != staged_owner_.end() ? claimed->second : committed_owner(k);
      if (e != now)
        throw co::fenced(e, now, k);
    }
    staged_positions_[k] = staged_position{p, e};
  }

  [[nodiscard]] std::optional<co::position> load_position(co::partition_id k) const {
    return t_->position(k);
  }

  std::optional<co::position> claim(co::partition_id k, co::epoch e) {
    require_tx("claim");
    {
      std::lock_guard lock(t_->m_);
      const co::epoch now = committed_owner(k);
      if (e < now)
        throw co::fenced(e, now, k);
    }
    staged_owner_[k] = e;
    return t_->position(k);
  }

  co::claimed claim_next(co::partition_id k) {
    require_tx("claim_next");
    const co::epoch e = t_->owner(k).next();
    staged_owner_[k] = e;
    return co::claimed{e, t_->position(k)};
  }

  [[nodiscard]] std::int64_t era() const { return t_->era(); }

  void check_partition_count(std::size_t n) {
    require_tx("check_partition_count");
    std::lock_guard lock(t_->m_);
    if (t_->partition_count_ && *t_->partition_count_ != n)
      throw co::partition_count_changed(*t_->partition_count_, n);
    if (!t_->partition_count_)
      staged_count_ = n;
  }

  [[nodiscard]] std::optional<co::offset> applied_watermark(co::partition_id k) const {
    std::lock_guard lock(t_->m_);
    const auto it = t_->watermarks_.find(k);
    return it == t_->watermarks_.end() ? std::nullopt : std::optional{it->second};
  }

  [[nodiscard]] int id() const noexcept { return id_; }
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }

 private:
  struct staged_position {
    co::position at;
    std::optional<co::epoch> owner;
  };

  co::epoch committed_owner(co::partition_id k) const {
    const auto it = t_->positions_.find(k);
    return it == t_->positions_.end() ? co::epoch{0} : it->second.owner;
  }
  co::epoch epoch_for(co::partition_id k) const {
    if (const auto s = staged_positions_.find(k); s != staged_positions_.end() && s->second.owner)
      return *s->second.owner;
    if (const auto o = staged_owner_.find(k); o != staged_owner_.end())
      return o->second;
    return committed_owner(k);
  }
  void require_tx(const char* what) const {
    if (!in_tx_)
      throw std::logic_error(std::string("shared_table: ") + what + " outside a transaction");
  }
  void clear() {
    staged_rows_.clear();
    staged_writes_.clear();
    staged_positions_.clear();
    staged_owner_.clear();
    staged_count_.reset();
  }

  shared_table* t_;
  int id_ = 0;
  bool in_tx_ = false;
  std::map<std::int64_t, row> staged_rows_;  // the rows as this transaction sees them
  std::vector<row> staged_writes_;           // every write it made, in order
  std::map<co::partition_id, staged_position> staged_positions_;
  std::map<co::partition_id, co::epoch> staged_owner_;
  std::optional<std::size_t> staged_count_;
  std::size_t commits_ = 0;
};

}  // namespace kafka_test
