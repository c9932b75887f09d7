// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres/unit_buffer.hpp — what a sink's transaction holds before it
// is sent: the unit's rows in the order their records were applied, and the positions it
// stores; how the part not sent yet becomes the statements of one round trip; and, from their
// answers, which rows the guard kept out and which offsets the table now holds. No I/O here:
// the sink sends, the transaction object (transaction.hpp) knows where the transaction stands.
//
// Every row is sent, in apply order; a statement carries at most `rows_per_statement` rows
// and never a key twice (an upsert cannot touch one row twice: 21000): a row whose key came
// earlier in its statement starts the next statement, so it applies after that row, as record
// by record, and the server's guard and constraints decide what stays -- never an ordering of
// this code's. The same key from two partitions in one unit is `key_moved_partition` under
// the offset guard (offsets of two partitions say nothing about which record is newer).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "commit_order/adapters/detail/position_protocol.hpp"
#include "commit_order/adapters/detail/write_modes.hpp"
#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/adapters/postgres/text.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::postgres::detail {

/// A position a transaction stores: checked on its locked row and written with the rows.
struct staged_position final {
  partition_id k;
  position p;
  epoch e;
  std::optional<std::uint64_t> fingerprint;
};

/// The rows and positions of one transaction of a sink writing table D in write mode Mode.
template <class D, class Mode>
class unit_buffer final {
  using cols = columns_of<typename D::keys, typename D::values>;

 public:
  using row_type = typename D::event_type;
  /// The parameters of one write statement: an array per column, then partitions, offsets.
  static constexpr std::size_t arrays_per_statement = cols::count + 2;

  struct row final {
    row_type value;
    partition_id k;
    offset o;
  };

  /// Appends row `r`'s values, partition and offset to one array per parameter.
  static void add_to(array_builder* arrays, const row& r) {
    cols::add_to(arrays, r.value);
    arrays[cols::count].add(r.k.value());
    arrays[cols::count + 1].add(r.o.value());
  }

  // ---- what the transaction holds -----------------------------------------------------------

  void add(partition_id k, offset o, const row_type& value) { rows_.push_back(row{value, k, o}); }

  /// Stages a position; one not sent yet for the same partition is replaced.
  void stage(const staged_position& s) {
    for (std::size_t i = staged_sent_; i < staged_.size(); ++i) {
      if (staged_[i].k == s.k) {
        staged_[i] = s;
        return;
      }
    }
    staged_.push_back(s);
  }

  /// Nothing was added or staged.
  [[nodiscard]] bool empty() const noexcept { return rows_.empty() && staged_.empty(); }
  /// Something was added or staged since the last round trip.
  [[nodiscard]] bool unsent() const noexcept {
    return rows_sent_ < rows_.size() || staged_sent_ < staged_.size();
  }
  /// Rows of the transaction were sent: the server's answers now include them, uncommitted.
  [[nodiscard]] bool rows_sent() const noexcept { return rows_sent_ != 0; }
  /// Every row, in the order it was added.
  [[nodiscard]] const std::vector<row>& rows() const noexcept { return rows_; }

  /// The positions the transaction stores (for an error whose outcome is in doubt).
  [[nodiscard]] std::vector<commit_in_doubt::stored> stored_positions() const {
    std::vector<commit_in_doubt::stored> out;
    out.reserve(staged_.size());
    for (const staged_position& s : staged_)
      out.push_back({s.k, s.p});
    return out;
  }

  /// Per partition, the highest offset the table holds because of the rows sent so far (see
  /// note_sent): what the transaction raises the applied watermark to when it commits.
  [[nodiscard]] std::span<const std::pair<partition_id, offset>> present() const noexcept {
    return present_;
  }

  // ---- one round trip: the part not sent yet --------------------------------------------------

  /// Plans the rows not sent yet into statements and encodes their parameters; returns how many
  /// statements. Throws key_moved_partition for one key from two partitions under the offset
  /// guard. `key_splits` counts the statements begun early because a key came again.
  std::size_t prepare_rows(std::size_t rows_per_statement, std::uint64_t& key_splits) {
    plan(rows_per_statement, key_splits);
    const std::size_t statements = bounds_.empty() ? 0 : bounds_.size() - 1;
    // Sized first: a builder that moved (a vector growing) would leave its parameter dangling.
    if (arrays_.size() < statements * arrays_per_statement)
      arrays_.resize(statements * arrays_per_statement);
    params_.resize(statements * arrays_per_statement);
    for (std::size_t s = 0; s < statements; ++s)
      encode(s, bounds_[s], bounds_[s + 1]);
    absorbed_.clear();
    return statements;
  }
  /// The parameters of statement `s` of the last prepare_rows.
  [[nodiscard]] const char* const* row_parameters(std::size_t s) const noexcept {
    return params_.data() + s * arrays_per_statement;
  }
  /// The rows the last prepare_rows planned (indices into rows()), in the order they are sent.
  [[nodiscard]] std::span<const std::uint32_t> sending() const noexcept { return sent_; }

  /// Positions were staged since the last round trip.
  [[nodiscard]] bool positions_unsent() const noexcept { return staged_sent_ < staged_.size(); }
  /// Encodes the positions not sent yet, partitions ascending (one lock order for every
  /// writer), as the six parameters of the fence and the position statement.
  const char* const* prepare_positions(const std::string& stream, const std::string& topic) {
    std::sort(staged_.begin() + static_cast<std::ptrdiff_t>(staged_sent_), staged_.end(),
              [](const staged_position& a, const staged_position& b) { return a.k < b.k; });
    for (auto& a : position_arrays_)
      a.clear();
    for (const staged_position& s : unsent_positions()) {
      position_arrays_[0].add(s.k.value());
      position_arrays_[1].add(s.p.value());
      position_arrays_[2].add(s.e.value());
      if (s.fingerprint)
        position_arrays_[3].add(adapters::detail::fingerprint_to_column(*s.fingerprint));
      else
        position_arrays_[3].add_null();
    }
    position_params_[0] = stream.c_str();
    position_params_[1] = topic.c_str();
    for (std::size_t i = 0; i < 4; ++i)
      position_params_[2 + i] = position_arrays_[i].finish();
    return position_params_;
  }
  /// The positions not sent yet (in the order prepare_positions sends them).
  [[nodiscard]] std::span<const staged_position> unsent_positions() const noexcept {
    return std::span(staged_).subspan(staged_sent_);
  }

  /// Of the rows sent, those the guard kept out: missing from what the write statements
  /// returned (RETURNING names each changed row by its incoming partition and offset).
  /// Returns them as indices into rows(); empty when every row changed.
  const std::vector<std::uint32_t>& absorbed(std::span<const result> statements) {
    absorbed_.clear();
    std::size_t returned = 0;
    for (const result& r : statements)
      returned += static_cast<std::size_t>(r.rows());
    if (returned == sent_.size())
      return absorbed_;  // nothing absorbed: the common case, decided without reading a value
    changed_.clear();
    for (const result& r : statements)
      for (int i = 0; i < r.rows(); ++i)
        changed_.emplace_back(r.integer(i, 0), r.integer(i, 1));
    std::sort(changed_.begin(), changed_.end());
    for (const std::uint32_t i : sent_) {
      const std::pair<std::int64_t, std::int64_t> id{rows_[i].k.value(), rows_[i].o.value()};
      if (!std::binary_search(changed_.begin(), changed_.end(), id))
        absorbed_.push_back(i);
    }
    return absorbed_;
  }

  /// The round trip's statements ran: what was planned is on the server now. Notes the offsets
  /// the table holds because of them: every row's, except a row the version guard kept out
  /// (the stored row is newer by its version, whatever its offset). A row the offset guard kept
  /// out stays covered: its partition holds that key at an offset as high or higher.
  void note_sent() {
    const std::size_t first = rows_sent_;
    if constexpr (Mode::guard == adapters::guard_kind::version) {
      std::size_t a = 0;  // absorbed_ is ascending, as the rows were sent
      for (std::size_t i = first; i < rows_.size(); ++i) {
        if (a < absorbed_.size() && absorbed_[a] == i) {
          ++a;
          continue;
        }
        raise_present(rows_[i].k, rows_[i].o);
      }
    } else {
      for (std::size_t i = first; i < rows_.size(); ++i)
        raise_present(rows_[i].k, rows_[i].o);
    }
    rows_sent_ = rows_.size();
    staged_sent_ = staged_.size();
  }

  /// Nothing is on the server any more (the unit goes again from the start).
  void resend() noexcept {
    rows_sent_ = staged_sent_ = 0;
    present_.clear();
  }

  /// Empties the buffer (keeping its memory: a steady stream of units allocates nothing new).
  void clear() noexcept {
    rows_.clear();
    staged_.clear();
    resend();
  }

 private:
  // The rows not sent yet, every one, in apply order (sent_), and where each statement starts
  // (bounds_): at most rows_per_statement rows, and never a key twice.
  void plan(std::size_t per, std::uint64_t& key_splits) {
    sent_.clear();
    bounds_.clear();
    const auto first = static_cast<std::uint32_t>(rows_sent_);
    const auto last = static_cast<std::uint32_t>(rows_.size());
    for (std::uint32_t i = first; i < last; ++i)
      sent_.push_back(i);
    if (sent_.empty())
      return;
    constexpr std::uint32_t none = ~std::uint32_t{0};
    if constexpr (Mode::keyed) {
      // The row of the same key before each row, if any: from a stable sort by key.
      order_.assign(sent_.begin(), sent_.end());
      const auto by_key = [this](std::uint32_t a, std::uint32_t b) {
        return cols::key_less(rows_[a].value, rows_[b].value);
      };
      if (!std::is_sorted(order_.begin(), order_.end(), by_key))
        std::stable_sort(order_.begin(), order_.end(), by_key);
      before_.assign(sent_.size(), none);
      for (std::size_t j = 1; j < order_.size(); ++j) {
        const std::uint32_t a = order_[j - 1];
        const std::uint32_t b = order_[j];
        if (by_key(a, b))
          continue;  // a new key
        if constexpr (Mode::guard == adapters::guard_kind::offset) {
          if (rows_[a].k != rows_[b].k)
            throw key_moved_partition(cols::key_text(rows_[a].value), rows_[a].k, rows_[a].o,
                                      rows_[b].k, rows_[b].o);
        }
        before_[b - first] = a;
      }
    }
    std::size_t start = 0;
    bounds_.push_back(0);
    for (std::size_t i = 1; i < sent_.size(); ++i) {
      bool repeated = false;
      if constexpr (Mode::keyed)
        repeated = before_[i] != none && before_[i] >= first + start;
      if (repeated || i - start == per) {
        key_splits += repeated && i - start != per;
        bounds_.push_back(static_cast<std::uint32_t>(i));
        start = i;
      }
    }
    bounds_.push_back(static_cast<std::uint32_t>(sent_.size()));
  }

  // The arrays of statement `s` (rows sent_[first, last)), ready as parameters.
  void encode(std::size_t s, std::size_t first, std::size_t last) {
    const std::size_t base = s * arrays_per_statement;
    array_builder* a = arrays_.data() + base;
    for (std::size_t c = 0; c < arrays_per_statement; ++c)
      a[c].clear();
    for (std::size_t i = first; i < last; ++i)
      add_to(a, rows_[sent_[i]]);
    for (std::size_t c = 0; c < arrays_per_statement; ++c)
      params_[base + c] = a[c].finish();
  }

  void raise_present(partition_id k, offset o) {
    // Most units hold one partition: the entry of the row before is the one to raise.
    if (!present_.empty() && present_.back().first == k) [[likely]] {
      if (present_.back().second < o)
        present_.back().second = o;
      return;
    }
    for (auto& [partition, highest] : present_) {
      if (partition == k) {
        if (highest < o)
          highest = o;
        return;
      }
    }
    present_.emplace_back(k, o);
  }

  std::vector<row> rows_;
  std::size_t rows_sent_ = 0;
  std::vector<staged_position> staged_;
  std::size_t staged_sent_ = 0;
  std::vector<std::pair<partition_id, offset>> present_;
  // Scratch, kept between transactions so a steady stream of units allocates nothing new.
  std::vector<std::uint32_t> order_;
  std::vector<std::uint32_t> sent_;
  std::vector<std::uint32_t> bounds_;  ///< where each statement's rows start in sent_
  std::vector<std::uint32_t> before_;  ///< the row of the same key before, per sent_
  std::vector<std::uint32_t> absorbed_;
  std::vector<std::pair<std::int64_t, std::int64_t>> changed_;
  std::vector<array_builder> arrays_;
  std::vector<const char*> params_;
  array_builder position_arrays_[4];
  const char* position_params_[6]{};
};

}  // namespace commit_order::postgres::detail
