// SPDX-License-Identifier: BSL-1.0
// KF2: a Kafka source whose codec decodes another event type than the source's (here the event of a
// neighbouring topic): every message would be refused, or worse, reinterpreted. The twin gives
// the source the codec of its own event.
#include <commit_order/adapters/json.hpp>
#include <commit_order/adapters/kafka.hpp>

#include <cstdint>

namespace cj = commit_order::json;
namespace kf = commit_order::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};
struct refund {
  std::int64_t id = 0;
};
using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>>>;
using refund_json = cj::codec<refund, cj::fields<cj::field<"id", &refund::id>>>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using source_t = kf::group_source<payment, commit_order::AtLeastOnce<>, refund_json>;
#else
using source_t = kf::group_source<payment, commit_order::AtLeastOnce<>, payment_json>;
#endif

std::size_t count(const kf::consumer_options& options) {
  source_t s(options);
  return s.poll(16).size();
}
