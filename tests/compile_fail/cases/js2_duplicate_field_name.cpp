// SPDX-License-Identifier: BSL-1.0
// JS2: json::codec with two fields under one JSON name -- one member would be read from the other's
// key, and encoding would write the key twice. The twin names each member's own key.
#include <commit_order/adapters/json.hpp>

#include <cstdint>
#include <span>

namespace cj = commit_order::json;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using payment_json =
    cj::codec<payment, cj::fields<cj::field<"id", &payment::id>, cj::field<"id", &payment::cents>>>;
#else
using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>>>;
#endif

payment read(std::span<const std::byte> value) {
  return payment_json::decode(value);
}
