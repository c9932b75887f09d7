// SPDX-License-Identifier: BSL-1.0
// Harness check: in fail mode the only error carries the expected text, but it is not a
// failed static_assert of the library. The driver must fail (registered WILL_FAIL): only
// the rules' own diagnostics count.
#include <commit_order/commit_order.hpp>

#include "../cases/fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
#error "commit_order R3: this policy replays after a crash"
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
