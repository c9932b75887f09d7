// SPDX-License-Identifier: BSL-1.0
// PG7: a version guard on a member the table does not keep, so the upsert has no stored
// version to compare with. The twin adds the column.
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

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"total_cents", &order_event::total_cents>>> {};
#else
struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"event_seq", &order_event::event_seq>,
                                         pg::column<"total_cents", &order_event::total_cents>>> {};
#endif

using sink_t = pg::version_guarded_sink<orders, &order_event::event_seq>;

void write(const std::string& conninfo, const order_event& e) {
  sink_t sink(conninfo);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
