// SPDX-License-Identifier: BSL-1.0
// The adversarial tier's event (commit_order/testing/adversarial.hpp): one column of each type
// the SQL adapters map, and the values a hostile reviewer feeds them.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <commit_order/testing/hostile_values.hpp>

namespace conformance {

struct hostile_event {
  std::int64_t id = 0;  ///< the key of the id-keyed tables
  double real = 0;      ///< the key of the real-keyed tables
  std::int64_t big = 0;
  std::string text;
  bool flag = false;
  friend bool operator==(const hostile_event&, const hostile_event&) = default;
};

/// Equal as a database compares stored values: NaN equals NaN, -0.0 equals 0.0 (SQL's
/// equality; SQLite keeps a REAL -0.0 as the integer 0).
inline bool same_real(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}
inline bool same_hostile(const hostile_event& a, const hostile_event& b) {
  return a.id == b.id && same_real(a.real, b.real) && a.big == b.big && a.text == b.text &&
         a.flag == b.flag;
}

/// What a hostile reviewer writes (commit_order/testing/hostile_values.hpp), twenty records:
/// each hostile value in the second of two records of one key (id, and the double), so that
/// every value is the last of its key and is read back, and a unit reordered or collapsed
/// leaves the first record's ordinary values instead. -0.0 and 0.0 are two keys of the id-keyed
/// tables and one of the double-keyed ones.
inline std::vector<hostile_event> hostile_values() {
  namespace t = commit_order::testing;
  const auto reals = t::hostile_doubles();
  const auto bigs = t::hostile_integers();
  const auto texts = t::hostile_texts();
  std::vector<hostile_event> out;
  for (std::size_t i = 0; i < reals.size(); ++i) {
    const auto id = static_cast<std::int64_t>(i) + 1;
    out.push_back({id, reals[i], 1000 + id, "ordinary " + std::to_string(id), false});
    out.push_back({id, reals[i], bigs[i], texts[i], (i % 2) == 0});
  }
  return out;
}

/// Whether a table layout is keyed on the event's double (specialised beside each adapter's
/// layouts): its rows are one per key as the database compares doubles (same_real).
template <class Layout>
inline constexpr bool keyed_on_real = false;

/// Which events share a row of a table keyed as `Layout` is.
template <class Layout>
bool same_hostile_key(const hostile_event& a, const hostile_event& b) {
  if constexpr (keyed_on_real<Layout>)
    return same_real(a.real, b.real);
  else
    return a.id == b.id;
}

/// The kit's own events, for the checks that need many (key, seq).
inline hostile_event plain_hostile(std::int64_t key, std::int64_t seq) {
  return hostile_event{key, static_cast<double>(key) + 0.5, seq, "seq " + std::to_string(seq),
                       (seq % 2) != 0};
}

}  // namespace conformance
