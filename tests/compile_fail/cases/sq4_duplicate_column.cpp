// SPDX-License-Identifier: BSL-1.0
// SQ4: a column named like the column every row carries its source offset in. The
// twin names it for what it holds.
#include <commit_order/adapters/sqlite.hpp>

#include <cstdint>
#include <filesystem>

namespace co = commit_order;
namespace sq = co::sqlite;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t total_cents = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct orders final
    : sq::table_layout<"orders", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"source_offset", &order_event::total_cents>>> {
};
#else
struct orders final
    : sq::table_layout<"orders", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"total_cents", &order_event::total_cents>>> {};
#endif

using sink_t = sq::guarded_upsert_sink<orders>;

void write(const std::filesystem::path& file, const order_event& e) {
  sink_t sink(file);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
