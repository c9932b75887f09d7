// SPDX-License-Identifier: BSL-1.0
// Constructor -- dead_letter<> handling with a dead-letter sink named but not passed. The
// twin passes it.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using letters_t = co::memory::dead_letters<order_event>;

void consume(order_log& log, upsert_table& sink, volatile_store& store, letters_t& letters) {
  using pipeline_t =
      co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
                   co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters_t>>;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  (void)letters;
  pipeline_t p(log, sink, store);
#else
  pipeline_t p(log, sink, store, letters);
#endif
  p.run();
}
