// SPDX-License-Identifier: BSL-1.0
// KF10: a Layout whose headers member is not const: the sink calls it on a const layout, so it
// would be skipped and every message sent without its headers. The twin declares it const.
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace co = commit_order;
namespace kf = co::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

struct payment_layout {
  [[nodiscard]] std::string_view topic(const payment&) const { return "payments.out"; }
  void value(const payment& p, std::vector<std::byte>& out) const {
    kf::trivial_codec<payment>::encode(p, out);
  }
#ifdef COMMIT_ORDER_COMPILE_FAIL
  void headers(const payment&, std::vector<kf::header_out>& out){
#else
  void headers(const payment&, std::vector<kf::header_out>& out) const {
#endif
      out.push_back(kf::header_out{"source", {std::byte{'p'}}});
}
}
;

using source_t = kf::group_source<payment, co::TransactionalPosition<>>;

void open(source_t& source, const kf::producer_options& options) {
  kf::transactional_sink<payment, payment_layout, source_t> sink(source, payment_layout{}, options);
  (void)sink;
}
