// SPDX-License-Identifier: BSL-1.0
// PG5: a column of an unsigned 64-bit member, which the database's signed integers cannot
// hold above INT64_MAX. The twin's member is signed.
#include <commit_order/adapters/postgres.hpp>

#include <cstdint>
#include <string>

namespace co = commit_order;
namespace pg = co::postgres;

struct order_event {
  std::int64_t order_id = 0;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  std::uint64_t total_cents = 0;
#else
  std::int64_t total_cents = 0;
#endif
};

struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"total_cents", &order_event::total_cents>>> {};

using sink_t = pg::guarded_upsert_sink<orders>;

void write(const std::string& conninfo, const order_event& e) {
  sink_t sink(conninfo);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
