// SPDX-License-Identifier: BSL-1.0
// JS4: json::codec with a field of a type the codec has no exact reading for (a char: a JSON string
// or a number?). The twin reads the code as an integer.
#include <commit_order/adapters/json.hpp>

#include <cstdint>
#include <span>

namespace cj = commit_order::json;

struct payment {
  std::int64_t id = 0;
  char currency_class = 'a';
  std::int32_t currency_code = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using payment_json = cj::codec<payment, cj::fields<cj::field<"id", &payment::id>,
                                                   cj::field<"class", &payment::currency_class>>>;
#else
using payment_json = cj::codec<payment, cj::fields<cj::field<"id", &payment::id>,
                                                   cj::field<"class", &payment::currency_code>>>;
#endif

payment read(std::span<const std::byte> value) {
  return payment_json::decode(value);
}
