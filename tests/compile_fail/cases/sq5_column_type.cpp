// SPDX-License-Identifier: BSL-1.0
// SQ5: a column of an unsigned 64-bit member, which the database's signed integers cannot
// hold above INT64_MAX. The twin's member is signed.
#include <commit_order/adapters/sqlite.hpp>

#include <cstdint>
#include <filesystem>

namespace co = commit_order;
namespace sq = co::sqlite;

struct order_event {
  std::int64_t order_id = 0;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  std::uint64_t total_cents = 0;
#else
  std::int64_t total_cents = 0;
#endif
};

struct orders final
    : sq::table_layout<"orders", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"total_cents", &order_event::total_cents>>> {};

using sink_t = sq::guarded_upsert_sink<orders>;

void write(const std::filesystem::path& file, const order_event& e) {
  sink_t sink(file);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
