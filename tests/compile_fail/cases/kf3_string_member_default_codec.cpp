// SPDX-License-Identifier: BSL-1.0
// KF3, the case issue 22 quotes, written as a new user would: an order event with a std::string
// member, produced to Kafka and consumed into PostgreSQL with the default codec, which copies
// the event's bytes (the string's would be a pointer into the producing process). Before the
// check was a part rule it printed 73 lines and no message of the library on g++. The twin reads
// and writes the topic as JSON, as the message says.
#include <commit_order/adapters/json.hpp>
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

#include <cstdint>
#include <string>

namespace co = commit_order;
namespace cj = co::json;
namespace kf = co::kafka;
namespace pg = co::postgres;

struct order_event {
  std::int64_t order_id = 0;
  std::string customer;
};

struct orders final
    : pg::table_layout<"orders", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"customer", &order_event::customer>>> {};

using order_json =
    cj::codec<order_event, cj::fields<cj::field<"order_id", &order_event::order_id>,
                                      cj::field<"customer", &order_event::customer>>>;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using producer_t = kf::producer<order_event>;
using source_t = kf::group_source<order_event, co::TransactionalPosition<>>;
#else
using producer_t = kf::producer<order_event, order_json>;
using source_t = kf::group_source<order_event, co::TransactionalPosition<>, order_json>;
#endif
using sink_t = pg::guarded_upsert_sink<orders>;

void produce(const kf::properties& config) {
  producer_t out(config, "orders");
  out.send(co::partition_id{0}, order_event{1, "ada"});
  out.flush();
}

void consume(const kf::consumer_options& options, sink_t& sink) {
  source_t source(options);
  co::pipeline<source_t, sink_t, co::TransactionalPosition<>> p(source, sink);
  p.run();
}
