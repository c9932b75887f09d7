// SPDX-License-Identifier: BSL-1.0
// The running example (docs/reference.md), shared by the examples: order events flattened
// into `orders_flat`, keyed by order_id, where later events update earlier orders. The examples
// define it here rather than use the tests' fixtures (tests/support/orders.hpp) so that each
// reads on its own, as a user's program would: everything it uses is in this directory.
#pragma once

#include <cstdint>
#include <cstdio>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/commit_order.hpp>

namespace example {

namespace co = commit_order;

struct order_event {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
};

using order_key = co::key<&order_event::order_id>;  // derived from the event, nothing else
using order_log = co::memory::log<order_event>;

/// 12 events over 4 orders: event i sets order i % 4 to a new total.
inline order_log make_orders() {
  order_log log;
  for (std::int64_t i = 0; i < 12; ++i)
    log.append(order_event{i % 4, 90 + i % 4, 1000 * (i + 1)});
  return log;
}

/// Crashes the pipeline (like SIGKILL: nothing else runs) the first time the step `Step` of
/// the second unit completes.
template <co::step_kind Step>
struct crash_after_second {
  int seen = 0;
  void at(const co::fault_point& p) {
    if (p.where == co::fault_point::kind::after_step && p.step == Step && ++seen == 2) {
      throw co::injected_crash{p};
    }
  }
};

template <class Table>
void print_rows(const char* title, const Table& table) {
  std::printf("%s\n", title);
  table.for_each([](const auto& r) {
    std::printf("  order %lld  customer %lld  total %7lld  (from offset %lld)\n",
                static_cast<long long>(r.row.order_id), static_cast<long long>(r.row.customer_id),
                static_cast<long long>(r.row.total_cents),
                static_cast<long long>(r.source_offset.value()));
  });
}

}  // namespace example
