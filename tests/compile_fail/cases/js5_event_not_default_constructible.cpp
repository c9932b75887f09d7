// SPDX-License-Identifier: BSL-1.0
// JS5: json::codec of an event that cannot be built empty (its only constructor takes the id),
// where decoding starts from Event{} and sets each field. The twin gives it a default
// constructor.
#include <commit_order/adapters/json.hpp>

#include <cstdint>
#include <span>

namespace cj = commit_order::json;

struct payment {
#ifndef COMMIT_ORDER_COMPILE_FAIL
  payment() = default;
#endif
  explicit payment(std::int64_t i) : id(i) {}
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>>>;

payment read(std::span<const std::byte> value) {
  return payment_json::decode(value);
}
