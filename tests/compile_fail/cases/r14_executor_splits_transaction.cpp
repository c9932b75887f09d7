// SPDX-License-Identifier: BSL-1.0
// R14 -- TransactionalPosition with its writes handed to a thread pool: one transaction cannot
// span writes made on several threads. The twin keeps the writes on the pipeline's thread.
#include <optional>

#include <commit_order/commit_order.hpp>
#include <commit_order/thread_pool.hpp>

#include "fixtures.hpp"

using namespace cf;

// A sink that is thread-safe and transactional, so that only the combination is wrong.
struct concurrent_tx_sink {
  using row_type = order_event;
  using key_type = order_key;
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional,
                                        co::Concurrent, co::Volatile>;
  void apply(co::offset, const order_event&) {}
  void begin() {}
  void commit() {}
  void rollback() {}
  void store_position(co::position) {}
  std::optional<co::position> load_position() const { return std::nullopt; }
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
void consume(order_log& log, concurrent_tx_sink& sink, co::thread_pool& pool) {
  co::pipeline<order_log, concurrent_tx_sink, co::TransactionalPosition<>,
               co::with_executor<co::thread_pool>>
      p(log, sink, pool);
  p.run();
}
#else
void consume(order_log& log, concurrent_tx_sink& sink, co::thread_pool&) {
  co::pipeline<order_log, concurrent_tx_sink, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
#endif
