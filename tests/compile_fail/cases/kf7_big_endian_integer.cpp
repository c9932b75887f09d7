// SPDX-License-Identifier: BSL-1.0
// KF7: big_endian_codec, the format of Kafka's integer serializers, asked for a double. The twin
// reads the 64-bit integer the producer wrote.
#include <commit_order/adapters/kafka.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace kf = commit_order::kafka;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using amount = double;
#else
using amount = std::int64_t;
#endif

amount read(std::span<const std::byte> value) {
  return kf::big_endian_codec<amount>::decode(value);
}
