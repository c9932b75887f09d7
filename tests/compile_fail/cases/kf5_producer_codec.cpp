// SPDX-License-Identifier: BSL-1.0
// KF5: a producer given a codec that only decodes (the consumer's): it could not write the
// topic. The twin's codec encodes too.
#include <commit_order/adapters/kafka.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace co = commit_order;
namespace kf = co::kafka;

struct payment {
  std::int64_t id = 0;
};

struct payment_codec {
  static payment decode(std::span<const std::byte> value) {
    payment p;
    std::memcpy(&p.id, value.data(), sizeof p.id);
    return p;
  }
#ifndef COMMIT_ORDER_COMPILE_FAIL
  static void encode(const payment& p, std::vector<std::byte>& out) {
    const std::size_t at = out.size();
    out.resize(at + sizeof p.id);
    std::memcpy(out.data() + at, &p.id, sizeof p.id);
  }
#endif
};

void produce(const kf::properties& config) {
  kf::producer<payment, payment_codec> out(config, "payments");
  out.send(co::partition_id{0}, payment{1});
  out.flush();
}
