// SPDX-License-Identifier: BSL-1.0
// S27 -- a source built for one policy inside a pipeline of another: the Kafka sources set up
// librdkafka's auto-commit (or their commit requests) from the policy they are given, so
// kafka::group_source<Event, AtMostOnce<AutoCommit>> in an AtLeastOnce pipeline would have
// librdkafka's timer commit what was polled, written or not. The twin names one policy.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

/// A source that declares the policy it was built for, as the Kafka sources do.
template <class Policy>
struct source_for final {
  using record_type = co::logged<order_event>;
  using capabilities = co::capabilities<co::Replicated>;
  using policy_type = Policy;
  order_log* log = nullptr;
  void seek(co::position p) { log->seek(p); }
  auto poll(std::size_t n) { return log->poll(n); }
  [[nodiscard]] co::position earliest() const { return log->earliest(); }
  [[nodiscard]] co::position end() const { return log->end(); }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using source_t = source_for<co::AtMostOnce<co::AutoCommit>>;
#else
using source_t = source_for<co::AtLeastOnce<>>;
#endif

void consume(source_t& source, upsert_table& sink, volatile_store& store) {
  co::pipeline<source_t, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      source, sink, store);
  p.run();
}
