// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/concat.hpp — joining strings in one allocation (private).
//
// g++ 12 at -O3 reports a false -Wrestrict inside `const char* + std::string&&` (libstdc++'s
// operator+ inserts at position 0 of the right-hand string; GCC bug 105651), which breaks a
// -Werror build of any code that writes `"\"" + std::string(name) + "\""`. Every string the
// adapters build (SQL text, messages) goes through concat() instead: the exact size is reserved
// once and each part appended, which is both warning-free and a single allocation.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace commit_order::detail {

/// The parts, joined. Each part is anything a std::string_view can be made from.
template <class... Parts>
[[nodiscard]] std::string concat(const Parts&... parts) {
  const std::string_view views[] = {std::string_view(parts)...};
  std::size_t size = 0;
  for (const std::string_view v : views)
    size += v.size();
  std::string out;
  out.reserve(size);
  for (const std::string_view v : views)
    out.append(v);
  return out;
}

}  // namespace commit_order::detail
