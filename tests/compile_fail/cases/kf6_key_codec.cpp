// SPDX-License-Identifier: BSL-1.0
// KF6: a compacted topic read with deletes, its keys written by Java's LongSerializer, given a
// string codec for its keys: it decodes text, not the 64-bit key. The twin reads the keys as
// big-endian integers.
#include <commit_order/adapters/kafka.hpp>

#include <cstddef>
#include <cstdint>

namespace co = commit_order;
namespace kf = co::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using key_codec = kf::string_codec;
#else
using key_codec = kf::big_endian_codec<std::int64_t>;
#endif
using payments = kf::with_deletes<payment, std::int64_t, key_codec>;
using source_t = kf::group_source<kf::change<payment, std::int64_t>, co::AtLeastOnce<>, payments>;

std::size_t count(const kf::consumer_options& options) {
  source_t s(options);
  return s.poll(16).size();
}
