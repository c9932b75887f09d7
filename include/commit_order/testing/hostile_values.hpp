// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/hostile_values.hpp — the values a hostile reviewer feeds a sink, per
// column type, for the adversarial tier's hostile_events() (adversarial.hpp). A fixture builds
// its events from them: each value once in a record that stays the last of its key (so it is
// read back), after a record of the same key with an ordinary value (so a unit reordered or
// collapsed shows).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace commit_order::testing {

/// The signed zeros, the infinities, the smallest subnormal, the largest and lowest finite
/// doubles, epsilon, an ordinary value, and NaN last (a database that refuses it refuses the
/// record, so the values it is paired with are the least hostile of the lists below).
inline std::vector<double> hostile_doubles() {
  using lim = std::numeric_limits<double>;
  return {-0.0,
          lim::infinity(),
          0.0,
          lim::denorm_min(),
          lim::max(),
          lim::lowest(),
          -lim::infinity(),
          lim::epsilon(),
          1.5,
          lim::quiet_NaN()};
}

/// The 64-bit limits, their neighbours, zero and minus one.
inline std::vector<std::int64_t> hostile_integers() {
  using lim = std::numeric_limits<std::int64_t>;
  return {lim::min(), lim::max(), 0, -1, lim::min() + 1, lim::max() - 1, 1, 42, -42, 7};
}

/// Empty text, a NUL byte inside text, invalid UTF-8 (a lone continuation byte, a truncated
/// sequence), long text, quotes and SQL, control characters, and multi-byte UTF-8.
inline std::vector<std::string> hostile_texts() {
  return {"",
          std::string("a\0b", 3),
          "\xff\xfe not UTF-8",
          std::string(5000, 'x'),
          "'; DROP TABLE hostile_rows; --",
          "na\xc3\xafve \xe2\x80\x94 \xf0\x9f\x98\x80",
          "\"quoted\" \\ backslash",
          "\n\t\r",
          "\xc3",
          std::string("\0", 1)};
}

}  // namespace commit_order::testing
