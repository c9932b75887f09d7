// SPDX-License-Identifier: BSL-1.0
// KF8: kafka::transactional_sink, whose positions are a consumer group's offsets sent inside
// its transactions, given a source of manually assigned partitions: no member the coordinator
// could check. The twin reads the input with a group_source.
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>

namespace co = commit_order;
namespace kf = co::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using source_t = kf::assigned_source<payment, co::TransactionalPosition<>>;
#else
using source_t = kf::group_source<payment, co::TransactionalPosition<>>;
#endif
using layout_t = kf::keyed_layout<&payment::id>;

void open(source_t& source, const kf::producer_options& options) {
  kf::transactional_sink<payment, layout_t, source_t> sink(source, layout_t("payments.out"),
                                                           options);
  (void)sink;
}
