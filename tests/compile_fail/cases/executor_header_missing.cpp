// SPDX-License-Identifier: BSL-1.0
// Executor support -- writes handed to an executor of the user's own in a translation unit that
// never included <commit_order/executor.hpp>: the executor path is kept out of the umbrella
// header (a synchronous pipeline does not parse it), so the message names the header to
// include. The twin includes it; the thread pool and the manual executor include it themselves.
#include <functional>

#include <commit_order/adapters/memory/synchronized.hpp>
#include <commit_order/commit_order.hpp>
#ifdef COMMIT_ORDER_COMPILE_FAIL
// <commit_order/executor.hpp> not included
#else
#include <commit_order/executor.hpp>
#endif

#include "fixtures.hpp"

using namespace cf;

struct inline_executor {
  void execute(std::function<void()> task) { task(); }
};
using sink_t = co::memory::synchronized<guarded_table>;

void consume(order_log& log, sink_t& sink, volatile_store& store, inline_executor& executor) {
  co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>,
               co::with_executor<inline_executor>>
      p(log, sink, store, executor);
  p.run();
}
