// SPDX-License-Identifier: BSL-1.0
// FL2: a file log given a codec that only decodes (a reader's codec): the log could not write
// its records. The twin's codec encodes too.
#include <commit_order/adapters/file.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace co = commit_order;

struct tick {
  std::int64_t at = 0;
};

struct tick_codec {
  static tick decode(std::span<const std::byte> payload) {
    tick t;
    std::memcpy(&t.at, payload.data(), sizeof t.at);
    return t;
  }
#ifndef COMMIT_ORDER_COMPILE_FAIL
  static void encode(const tick& t, std::vector<std::byte>& out) {
    const std::size_t at = out.size();
    out.resize(at + sizeof t.at);
    std::memcpy(out.data() + at, &t.at, sizeof t.at);
  }
#endif
};

using tick_log = co::file::log<tick, tick_codec>;

void record(tick_log& log, std::int64_t at) {
  log.append(tick{at});
}
