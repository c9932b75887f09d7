// SPDX-License-Identifier: BSL-1.0
// SQ9: a durability mode of one's own, a rollback journal with synchronous=NORMAL, which a power
// cut at the wrong moment can leave corrupt. The twin's journal syncs at EXTRA.
#include <commit_order/adapters/sqlite.hpp>

#include <cstdint>
#include <filesystem>

namespace co = commit_order;
namespace sq = co::sqlite;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};

struct orders final
    : sq::table_layout<"orders", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"total_cents", &order_event::total_cents>>> {};

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct delete_normal final
    : sq::detail::durability_pragmas<sq::journal_mode::rollback_delete, sq::synchronous::normal> {};
using mode = delete_normal;
#else
struct delete_extra_mode final
    : sq::detail::durability_pragmas<sq::journal_mode::rollback_delete, sq::synchronous::extra> {};
using mode = delete_extra_mode;
#endif

void write(const std::filesystem::path& file, const order_event& e) {
  sq::guarded_upsert_sink<orders, mode> sink(file);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
