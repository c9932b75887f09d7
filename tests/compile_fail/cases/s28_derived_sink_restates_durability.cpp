// SPDX-License-Identifier: BSL-1.0
// S28, the case issue 22 quotes: a sink derived from a PostgreSQL sink whose connection gives
// Buffered (synchronous_commit may lose the last commits to a power cut) restates its
// capabilities to add Ledger, and says Synced while doing so. It compiled, and the rules judged
// a durability the server was never checked for. The twin restates the adapter's own Buffered.
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

struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"total_cents", &order_event::total_cents>>> {};

/// The orders table, which the ledger reads: its loss is never acceptable.
struct ledger_sink : pg::guarded_upsert_sink<orders, pg::buffered> {
  using table_sink::table_sink;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped,
                                        co::Transactional, co::Synced, co::Ledger>;
#else
  using capabilities = co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped,
                                        co::Transactional, co::Buffered, co::Ledger>;
#endif
};

using file_log = co::file::log<order_event>;

void consume(file_log& log, ledger_sink& sink) {
  co::pipeline<file_log, ledger_sink, co::TransactionalPosition<>> p(log, sink);
  p.run();
}
