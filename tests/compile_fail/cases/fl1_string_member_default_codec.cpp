// SPDX-License-Identifier: BSL-1.0
// FL1: the file log's side of the case issue 22 quotes -- an order event with a std::string
// member, logged with the default codec, which writes the event's bytes (the string's are a
// pointer into this process). The twin keeps the customer in a fixed array, which the codec
// copies whole.
#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace co = commit_order;

struct order_event {
  std::int64_t order_id = 0;
#ifdef COMMIT_ORDER_COMPILE_FAIL
  std::string customer;
#else
  std::array<char, 16> customer{};
#endif
};

using order_key = co::key<&order_event::order_id>;
using table_t = co::memory::table<
    order_event, order_key,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::Transactional, co::Volatile>>;

void consume(co::file::log<order_event>& log, table_t& table) {
  co::pipeline<co::file::log<order_event>, table_t, co::TransactionalPosition<>> p(log, table);
  p.run();
}
