// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/detail/step_model.hpp — the crash matrix's reference (private): where, in
// a policy's executed step list, the write and the position become durable — read off the list
// here, independently of the library's own analysis —, the fault points each unit of work must
// pass, and what a crash at each of them has made durable.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "commit_order/faults.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/steps.hpp"

namespace commit_order::testing::detail {

/// Where the write and the position of one unit become durable in a step list.
struct step_model {
  std::vector<step_kind> kinds;
  std::size_t write_at = 0;
  std::size_t write_durable_at = 0;
  std::size_t position_durable_at = 0;  ///< unused when `timer`
  bool timer = false;
  bool transactional = false;
  /// The write step is a transaction of its own: the policy has no Begin, the sink is
  /// Transactional (a write step over a transactional sink is one transaction: docs/reference.md,
  /// "Run-time behaviour worth knowing").
  bool write_in_own_transaction = false;
};

template <std::size_t N>
step_model model_of(const std::array<step_kind, N>& kinds, bool sink_transactional) {
  step_model m;
  m.kinds.assign(kinds.begin(), kinds.end());
  std::optional<std::size_t> begin_at, store_at, commit_at;
  for (std::size_t i = 0; i < N; ++i) {
    switch (kinds[i]) {
      case step_kind::write:
        m.write_at = i;
        break;
      case step_kind::commit_position:
        m.position_durable_at = i;
        break;
      case step_kind::timed_commit_position:
        m.timer = true;
        break;
      case step_kind::begin:
        begin_at = i;
        break;
      case step_kind::store_position:
        store_at = i;
        break;
      case step_kind::commit:
        commit_at = i;
        break;
      case step_kind::poll:
        break;
    }
  }
  m.transactional = begin_at.has_value();
  // Inside a transaction nothing is durable before its commit.
  const bool write_inside =
      begin_at && commit_at && *begin_at < m.write_at && m.write_at < *commit_at;
  m.write_durable_at = write_inside ? *commit_at : m.write_at;
  m.write_in_own_transaction = !m.transactional && sink_transactional;
  if (store_at && commit_at)
    m.position_durable_at = *commit_at;
  return m;
}

/// A fault point as the reference predicts it.
struct point_ref {
  fault_point::kind where = fault_point::kind::after_step;
  step_kind step = step_kind::poll;
  std::size_t index = 0;
  std::size_t row = 0;
  std::size_t unit = 0;  ///< the unit's number in the life
};

/// Every gap of every unit (`unit_sizes`: the records of each, in order): after each step of
/// the policy's list, and after each row of the write, in order.
inline std::vector<point_ref> reference_points(const step_model& m,
                                               const std::vector<std::size_t>& unit_sizes) {
  std::vector<point_ref> pts;
  using k = fault_point::kind;
  for (std::size_t u = 0; u < unit_sizes.size(); ++u) {
    for (std::size_t i = 0; i < m.kinds.size(); ++i) {
      if (m.kinds[i] == step_kind::write) {
        for (std::size_t r = 1; r <= unit_sizes[u]; ++r)
          pts.push_back(point_ref{k::after_row, m.kinds[i], i, r, u});
      }
      pts.push_back(point_ref{k::after_step, m.kinds[i], i, 0, u});
    }
  }
  return pts;
}

/// The fault point the pipeline reported is the predicted one, of a unit that ends at
/// `unit_end`.
inline bool matches(const fault_point& got, const point_ref& want, position unit_end) {
  return got.where == want.where && got.step == want.step && got.step_index == want.index &&
         got.row == want.row && got.unit_end == unit_end && got.unit == want.unit;
}

/// What a crash at `q` has made durable of its unit: rows written, and whether the position
/// already covers the unit. (Not meaningful for the position of a timer policy.)
struct crash_effect {
  std::size_t rows_durable = 0;
  bool position_durable = false;
};

inline crash_effect effect_of(const step_model& m, const point_ref& q, std::size_t unit_size) {
  crash_effect e;
  if (q.where == fault_point::kind::after_row) {
    // Rows are durable one by one only when no transaction holds them back.
    e.rows_durable = m.write_durable_at == m.write_at && !m.write_in_own_transaction ? q.row : 0;
    e.position_durable = !m.timer && m.position_durable_at < m.write_at;
  } else {
    e.rows_durable = q.index >= m.write_durable_at ? unit_size : 0;
    e.position_durable = !m.timer && q.index >= m.position_durable_at;
  }
  return e;
}

/// "after row 2 of the write", "after step 1 (commit position)".
inline std::string describe_point(const point_ref& q, const step_model& m) {
  if (q.where == fault_point::kind::after_row)
    return "after row " + std::to_string(q.row) + " of the write";
  static constexpr std::array<const char*, 7> names{
      "poll", "write", "commit position", "begin", "store position", "commit", "timed commit"};
  return "after step " + std::to_string(q.index) + " (" +
         names[static_cast<std::size_t>(m.kinds[q.index])] + ")";
}

}  // namespace commit_order::testing::detail
