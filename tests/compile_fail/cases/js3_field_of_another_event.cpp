// SPDX-License-Identifier: BSL-1.0
// JS3: json::codec of payments with a field that names a refund's member (both have cents).
// The twin names the payment's.
#include <commit_order/adapters/json.hpp>

#include <cstdint>
#include <span>

namespace cj = commit_order::json;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};
struct refund {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &refund::cents>>>;
#else
using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>>>;
#endif

payment read(std::span<const std::byte> value) {
  return payment_json::decode(value);
}
