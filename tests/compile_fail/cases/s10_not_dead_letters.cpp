// SPDX-License-Identifier: BSL-1.0
// S10 -- a vector handed over as the dead-letter sink: it has no put(offset, event, reason).
// The twin uses the testing kit's dead-letter sink.
#include <vector>

#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using letters_t = std::vector<order_event>;
#else
using letters_t = co::memory::dead_letters<order_event>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store, letters_t& letters) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters_t>>
      p(log, sink, store, letters);
  p.run();
}
