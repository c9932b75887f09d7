// SPDX-License-Identifier: BSL-1.0
// Harness control: a legal pipeline with no illegal line at all. In compile mode it must
// compile; in fail mode the driver must report failure (registered WILL_FAIL), which proves
// that a case whose illegal line does not fail is caught.
#include <commit_order/commit_order.hpp>

#include "../cases/fixtures.hpp"

using namespace cf;

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>> p(
      log, sink, store);
  p.run();
}
