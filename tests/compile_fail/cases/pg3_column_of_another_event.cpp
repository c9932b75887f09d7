// SPDX-License-Identifier: BSL-1.0
// PG3, the case issue 22 quotes, written as a new user would, pipeline and all: the key column
// of a PostgreSQL table of orders points into the refund event (both have an order_id). Before
// the check was a part rule it printed two errors on g++, the second a misleading R8 (the key
// is no projection of the order), and five on clang. The twin points it into the order event.
#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>

namespace co = commit_order;
namespace pg = co::postgres;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};
struct refund_event {
  std::int64_t order_id = 0;
  std::int64_t cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using order_id_column = pg::column<"order_id", &refund_event::order_id>;
#else
using order_id_column = pg::column<"order_id", &order_event::order_id>;
#endif

struct orders_flat final
    : pg::table_layout<"orders_flat", order_event, pg::key_columns<order_id_column>,
                       pg::value_columns<pg::column<"total_cents", &order_event::total_cents>>> {};

using file_log = co::file::log<order_event>;
using sink_t = pg::guarded_upsert_sink<orders_flat>;

void consume(file_log& log, sink_t& sink) {
  co::pipeline<file_log, sink_t, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
