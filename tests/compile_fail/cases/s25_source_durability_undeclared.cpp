// SPDX-License-Identifier: BSL-1.0
// S25 -- a source that does not say whether it outlives its consumers: rule R9c cannot tell
// whether it may forget records behind a stored position. The twin declares Replicated (a
// broker).
#include <commit_order/commit_order.hpp>

#include <span>
#include <vector>

#include "fixtures.hpp"

using namespace cf;

struct topic_partition {
#ifndef COMMIT_ORDER_COMPILE_FAIL
  using capabilities = co::capabilities<co::Replicated>;
#endif
  std::vector<co::logged<order_event>> records;
  void seek(co::position) {}
  std::span<const co::logged<order_event>> poll(std::size_t) {
    return records;
  }
  co::position earliest() const {
    return co::position{0};
  }
  co::position end() const {
    return co::position{0};
  }
};

void consume(topic_partition& source, upsert_table& sink, volatile_store& store) {
  co::pipeline<topic_partition, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      source, sink, store);
  p.run();
}
