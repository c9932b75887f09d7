// SPDX-License-Identifier: BSL-1.0
// PG6: a version guard on a member of another event type (the shipment's sequence, in the
// table of orders). The twin guards on the order's own.
#include <commit_order/adapters/postgres.hpp>

#include <cstdint>
#include <string>

namespace co = commit_order;
namespace pg = co::postgres;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t event_seq = 0;
  std::int64_t total_cents = 0;
  bool cancelled = false;
};
struct shipment_event {
  std::int64_t order_id = 0;
  std::int64_t event_seq = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"event_seq", &order_event::event_seq>,
                                         pg::column<"total_cents", &order_event::total_cents>>> {};
constexpr auto version = &shipment_event::event_seq;
#else
struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"event_seq", &order_event::event_seq>,
                                         pg::column<"total_cents", &order_event::total_cents>>> {};
constexpr auto version = &order_event::event_seq;
#endif

using sink_t = pg::version_guarded_sink<orders, version>;

void write(const std::string& conninfo, const order_event& e) {
  sink_t sink(conninfo);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
