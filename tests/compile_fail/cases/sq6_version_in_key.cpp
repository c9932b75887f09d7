// SPDX-License-Identifier: BSL-1.0
// SQ6: a version guard on a column of the key: each version of an order would be a row of its
// own, and the guard would never find the row it guards. The twin keeps the version a value.
#include <commit_order/adapters/sqlite.hpp>

#include <cstdint>
#include <filesystem>

namespace co = commit_order;
namespace sq = co::sqlite;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t event_seq = 0;
  std::int64_t total_cents = 0;
  bool cancelled = false;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
struct orders final
    : sq::table_layout<"orders", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>,
                                       sq::column<"event_seq", &order_event::event_seq>>,
                       sq::value_columns<sq::column<"total_cents", &order_event::total_cents>>> {};
#else
struct orders final
    : sq::table_layout<"orders", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"event_seq", &order_event::event_seq>,
                                         sq::column<"total_cents", &order_event::total_cents>>> {};
#endif

using sink_t = sq::version_guarded_sink<orders, &order_event::event_seq>;

void write(const std::filesystem::path& file, const order_event& e) {
  sink_t sink(file);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
