// SPDX-License-Identifier: BSL-1.0
// S21 -- a fault injector whose at() takes a mutable fault_point would never be called: the
// crash test would pass without ever crashing. The twin takes const fault_point&.
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;

struct crash_after_write {
#ifdef COMMIT_ORDER_COMPILE_FAIL
  void at(co::fault_point& p){
#else
  void at(const co::fault_point& p) {
#endif
      if (p.step == co::step_kind::write) throw co::injected_crash{p};
}
}
;

void consume(order_log& log, upsert_table& sink, volatile_store& store) {
  co::pipeline<order_log, upsert_table, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_faults<crash_after_write>>
      p(log, sink, store);
  p.run();
}
