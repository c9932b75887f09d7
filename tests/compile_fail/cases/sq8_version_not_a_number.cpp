// SPDX-License-Identifier: BSL-1.0
// SQ8: a version guard on a flag: a version is a number the producer raises per key. The twin
// guards on the event sequence.
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
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"cancelled", &order_event::cancelled>,
                                         sq::column<"total_cents", &order_event::total_cents>>> {};
constexpr auto version = &order_event::cancelled;
#else
struct orders final
    : sq::table_layout<"orders", order_event,
                       sq::key_columns<sq::column<"order_id", &order_event::order_id>>,
                       sq::value_columns<sq::column<"event_seq", &order_event::event_seq>,
                                         sq::column<"total_cents", &order_event::total_cents>>> {};
constexpr auto version = &order_event::event_seq;
#endif

using sink_t = sq::version_guarded_sink<orders, version>;

void write(const std::filesystem::path& file, const order_event& e) {
  sink_t sink(file);
  sink.begin();
  sink.apply(co::partition_id{0}, co::offset{0}, e);
  sink.commit();
}
