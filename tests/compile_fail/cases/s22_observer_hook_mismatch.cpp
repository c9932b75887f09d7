// SPDX-License-Identifier: BSL-1.0
// S22 -- an observer hook whose parameters do not match what the pipeline passes (an int for
// an offset) would silently never be called. A misspelt event does not compile at all, in the
// observer itself. The twin takes the offset.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct rows_counter {
  long rows = 0;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  void on(co::events::row_written, int) {
    ++rows;
  }
#else
  void on(co::events::row_written, co::offset) {
    ++rows;
  }
#endif
};

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_observer<rows_counter>>
      p(log, sink, store);
  p.run();
}
