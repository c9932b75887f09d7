// SPDX-License-Identifier: BSL-1.0
// R11 -- dead_letter error handling with nowhere to put the records it gives up on: the
// position would pass a record that exists nowhere. The twin names a dead-letter sink.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using letters_t = co::memory::dead_letters<order_event>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
void consume(order_log& log, upsert_table& sink, volatile_store& store, letters_t&) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_error_handling<co::dead_letter<>>>
      p(log, sink, store);
  p.run();
}
#else
void consume(order_log& log, upsert_table& sink, volatile_store& store, letters_t& letters) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters_t>>
      p(log, sink, store, letters);
  p.run();
}
#endif
