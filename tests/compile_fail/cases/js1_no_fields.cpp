// SPDX-License-Identifier: BSL-1.0
// JS1: json::codec with no fields: every event would decode as Event{}. The twin lists them.
#include <commit_order/adapters/json.hpp>

#include <cstdint>
#include <span>

namespace cj = commit_order::json;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using payment_json = cj::codec<payment, cj::fields<>>;
#else
using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>>>;
#endif

payment read(std::span<const std::byte> value) {
  return payment_json::decode(value);
}
