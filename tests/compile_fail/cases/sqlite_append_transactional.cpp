// SPDX-License-Identifier: BSL-1.0
// R5 on real storage -- the SQLite sink's plain append mode has transactions, but no offset
// guard: under TransactionalPosition a replayed older record would overwrite newer data (here:
// be stored as a second row). The twin uses the guarded upsert mode of the same table.
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

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = sq::append_sink<orders_flat>;
#else
using sink_t = sq::guarded_upsert_sink<orders_flat>;
#endif

void consume(file_log& log, sink_t& sink) {
  co::pipeline<file_log, sink_t, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
