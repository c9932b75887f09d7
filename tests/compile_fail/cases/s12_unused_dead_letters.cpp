// SPDX-License-Identifier: BSL-1.0
// S12 -- a dead-letter sink named while the error handling stops at the first failure: the
// sink would silently never receive anything. The twin dead-letters.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using letters_t = co::memory::dead_letters<order_event>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using handling_t = co::stop;
#else
using handling_t = co::dead_letter<>;
#endif

void consume(order_log& log, upsert_table& sink, volatile_store& store, letters_t& letters) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_error_handling<handling_t>, co::with_dead_letters<letters_t>>
      p(log, sink, store, letters);
  p.run();
}
