// SPDX-License-Identifier: BSL-1.0
// S6 through kafka::lag_reports: the wrapper forwards exactly the capabilities of the sink it
// wraps, and a sink that declares none leaves it without, so the pipeline's rule says so -- one
// error (lag_reports' own check used to add a second). The twin's sink declares them.
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>
#include <optional>

namespace co = commit_order;
namespace kf = co::kafka;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};

struct orders_sink {
  using row_type = order_event;
#ifndef COMMIT_ORDER_COMPILE_FAIL
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped,
                                        co::Transactional, co::Replicated>;
  using key_type = co::key<&order_event::order_id>;
#endif
  co::write_outcome apply(co::offset, const order_event&) {
    return co::write_outcome::applied;
  }
  co::write_outcome apply(co::partition_id, co::offset, const order_event&) {
    return co::write_outcome::applied;
  }
  void begin() {}
  void commit() {}
  void rollback() noexcept {}
  void store_position(co::partition_id, co::position) {}
  std::optional<co::position> load_position(co::partition_id) const {
    return std::nullopt;
  }
};

using source_t = kf::assigned_source<order_event, co::TransactionalPosition<>>;
using sink_t = kf::lag_reports<orders_sink>;

void consume(const kf::consumer_options& options, orders_sink& sink) {
  source_t source(options, {co::partition_id{0}, co::partition_id{1}});
  sink_t reported(sink, source);
  co::pipeline<source_t, sink_t, co::TransactionalPosition<>> p(source, reported);
  p.run();
}
