// SPDX-License-Identifier: BSL-1.0
// KF11: a transactional sink's dead-letter topic given a Letter format that keeps the key of a
// failed record but not its value. The twin's format gives both.
#include <commit_order/adapters/kafka.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace co = commit_order;
namespace kf = co::kafka;

struct payment {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};

struct payment_letter {
  static std::optional<std::vector<std::byte>> key(const payment& p) {
    return std::vector<std::byte>(sizeof p.id, std::byte{0});
  }
#ifndef COMMIT_ORDER_COMPILE_FAIL
  static std::optional<std::vector<std::byte>> value(const payment& p) {
    return std::vector<std::byte>(sizeof p.cents, std::byte{0});
  }
#endif
};

using source_t = kf::group_source<payment, co::TransactionalPosition<>>;
using layout_t = kf::keyed_layout<&payment::id>;
using sink_t = kf::transactional_sink<payment, layout_t, source_t>;

void keep(sink_t& sink, const payment& p) {
  sink_t::dead_letters<payment, payment_letter> letters(sink, "payments.dead");
  letters.put(co::partition_id{0}, co::offset{7}, p, "refused");
}
