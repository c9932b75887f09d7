// SPDX-License-Identifier: BSL-1.0
// What the SQLite and PostgreSQL benchmarks share (bench/sqlite_cases.hpp,
// bench/postgres_cases.hpp, and their drivers): the order event, the log both read, and the
// figures their ratio tables are made of. Each benchmark describes its own table of it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace bench_support {

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  std::int64_t event_seq = 0;
};

/// Distinct orders: the table holds exactly this many rows, all of them seeded.
inline constexpr std::int64_t orders = 1024;

using log_t = commit_order::memory::log<order_event, commit_order::Synced>;
using reader_t = log_t::reader;

/// The seeded records (offsets 0 .. orders-1, already in the table when a case starts) and
/// `round_records` after them. Record i is order i % orders, so every measured record updates
/// a row with a newer offset.
inline log_t seeded_log(std::int64_t round_records) {
  log_t l;
  for (std::int64_t i = 0; i < orders + round_records; ++i)
    l.append(order_event{i % orders, 100 + i % 97, i, i / orders + 1});
  return l;
}

/// A run's case without the decorations Google Benchmark appends ("/iterations:N/real_time").
inline std::string case_of(const std::string& run_name) {
  const auto batch = run_name.find("/batch:");
  const auto end = run_name.find('/', batch + 1);
  return run_name.substr(0, end);
}

inline double median(std::vector<double> v) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace bench_support
