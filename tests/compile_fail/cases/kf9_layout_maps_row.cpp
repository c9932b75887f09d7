// SPDX-License-Identifier: BSL-1.0
// KF9: kafka::transactional_sink given a Layout that maps another row type than the sink's (a
// layout written for the event, used for the enriched row). The twin's layout maps the row.
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>

namespace co = commit_order;
namespace kf = co::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};
struct enriched_payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
  std::int64_t fee = 0;
};

using source_t = kf::group_source<payment, co::TransactionalPosition<>>;
#ifdef COMMIT_ORDER_COMPILE_FAIL
using layout_t = kf::keyed_layout<&payment::id>;
#else
using layout_t = kf::keyed_layout<&enriched_payment::id>;
#endif

void open(source_t& source, const kf::producer_options& options) {
  kf::transactional_sink<enriched_payment, layout_t, source_t> sink(
      source, layout_t("payments.enriched"), options);
  (void)sink;
}
