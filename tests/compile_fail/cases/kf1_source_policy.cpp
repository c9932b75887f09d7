// SPDX-License-Identifier: BSL-1.0
// KF1: a Kafka source given its codec where the pipeline's policy goes (the policy left out).
// The twin names the policy, then the codec.
#include <commit_order/adapters/json.hpp>
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/policy.hpp>

#include <cstddef>
#include <cstdint>

namespace cj = commit_order::json;
namespace kf = commit_order::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};
using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>>>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using source_t = kf::group_source<payment, payment_json>;
#else
using source_t = kf::group_source<payment, commit_order::AtLeastOnce<>, payment_json>;
#endif

std::size_t count(const kf::consumer_options& options) {
  source_t s(options);
  return s.poll(16).size();
}
