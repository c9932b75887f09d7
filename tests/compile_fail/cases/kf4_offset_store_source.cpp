// SPDX-License-Identifier: BSL-1.0
// KF4: kafka::offset_store, which commits a group's offsets per partition, given a source of
// one manually assigned partition. The twin gives that source its own store.
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>

namespace co = commit_order;
namespace kf = co::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

using source_t = kf::partition_source<payment, co::AtLeastOnce<>>;
#ifdef COMMIT_ORDER_COMPILE_FAIL
using store_t = kf::offset_store;
#else
using store_t = kf::partition_offset_store;
#endif

void open(const kf::consumer_options& options) {
  source_t source(options, co::partition_id{0});
  store_t store(source);
  (void)store;
}
