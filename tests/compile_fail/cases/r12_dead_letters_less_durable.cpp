// SPDX-License-Identifier: BSL-1.0
// R12 -- a durable (Synced) table whose failed records go to an in-memory dead-letter list:
// the position passes a record that dies with the process. The twin's dead letters are Synced.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

using synced_table = order_table<co::Idempotent, co::Synced>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using letters_t = co::memory::dead_letters<order_event, co::Volatile>;
#else
using letters_t = co::memory::dead_letters<order_event, co::Synced>;
#endif

void consume(synced_log& log, synced_table& sink, synced_store& store, letters_t& letters) {
  co::pipeline<synced_log, synced_table, co::AtLeastOnce<>, co::with_store<synced_store>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters_t>>
      p(log, sink, store, letters);
  p.run();
}
