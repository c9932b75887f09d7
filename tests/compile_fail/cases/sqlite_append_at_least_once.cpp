// SPDX-License-Identifier: BSL-1.0
// R3 on real storage -- the SQLite sink's plain append mode under AtLeastOnce: every replay after
// a crash would become a duplicate row. The twin uses the guarded upsert mode of the same table.
#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "fixtures.hpp"

using namespace cf;
namespace sq = co::sqlite;

struct orders_flat final
    : sq::table_layout<"orders_flat", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"total_cents", &order_event::total_cents>>> {};

using file_log = co::file::log<order_event>;
using file_store = co::file::position_store;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = sq::append_sink<orders_flat>;
#else
using sink_t = sq::guarded_upsert_sink<orders_flat>;
#endif

void consume(file_log& log, sink_t& sink, file_store& store) {
  co::pipeline<file_log, sink_t, co::AtLeastOnce<>, co::with_store<file_store>> p(log, sink, store);
  p.run();
}
