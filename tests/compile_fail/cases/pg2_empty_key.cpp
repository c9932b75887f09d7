// SPDX-License-Identifier: BSL-1.0
// PG2: a table whose key_columns<> is empty, so its upsert has nothing to conflict on.
// The twin keys it on the order id.
#include <commit_order/adapters/postgres.hpp>

#include <cstdint>
#include <string>

namespace co = commit_order;
namespace pg = co::postgres;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct orders final
    : pg::table_layout<"orders", order_event, pg::key_columns<>,
                       pg::value_columns<pg::column<"order_id", &order_event::order_id>,
                                         pg::column<"total_cents", &order_event::total_cents>>> {};
#else
struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"total_cents", &order_event::total_cents>>> {};
#endif

using sink_t = pg::guarded_upsert_sink<orders>;

void write(const std::string& conninfo, const order_event& e) {
  sink_t sink(conninfo);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
