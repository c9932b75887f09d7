// SPDX-License-Identifier: BSL-1.0
// PG8: PostgreSQL dead letters given a Letter format that keeps the key of a failed record but
// not its value. The twin's format gives both.
#include <commit_order/adapters/postgres.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace co = commit_order;
namespace pg = co::postgres;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

struct payment_letter {
  static std::optional<std::vector<std::byte>> key(const payment& p) {
    return std::vector<std::byte>(sizeof p.id, std::byte{0});
  }
#ifndef COMMIT_ORDER_COMPILE_FAIL
  static std::optional<std::vector<std::byte>> value(const payment& p) {
    return std::vector<std::byte>(sizeof p.cents, std::byte{0});
  }
#endif
};

void keep(const std::string& conninfo, const payment& p) {
  pg::dead_letter_options options;
  options.stream = "payments";
  pg::dead_letters<payment, payment_letter> letters(conninfo, options);
  letters.put(co::partition_id{0}, co::offset{7}, p, "refused");
}
