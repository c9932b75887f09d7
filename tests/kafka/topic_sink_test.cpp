// SPDX-License-Identifier: BSL-1.0
// kafka::topic_sink on librdkafka's mock cluster, under AtLeastOnce with Kafka's committed
// offsets as the position store: what it refuses at construction; every record once when
// nothing fails; a crash between the write and the position appends a duplicate run, which the
// type declares (MayDuplicate); and a unit whose messages the brokers refuse or do not
// acknowledge never has its position committed.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <commit_order/testing/recording_sink.hpp>

#include "support.hpp"

using namespace kafka_test;

namespace {

constexpr std::int16_t produce_api = 0;
const co::partition_id p0{0};
const co::partition_id p1{1};

using policy_t = co::AtLeastOnce<>;
using source_t = kf::assigned_source<order, policy_t>;
using layout_t = kf::keyed_layout<&order::order_id>;
using sink_t = kf::topic_sink<order, layout_t>;
using pipeline_t = co::pipeline<source_t, sink_t, policy_t, co::with_store<kf::offset_store>>;

// The type says what a crash leaves in the output topic: duplicates, never a loss.
static_assert(std::is_same_v<pipeline_t::guarantee, co::MayDuplicate>);
// Not exactly once: that is kafka::transactional_sink's, under TransactionalPosition (R4).
static_assert(std::is_same_v<co::verdict_t<kf::assigned_source<order, co::TransactionalPosition<>>,
                                           sink_t, co::TransactionalPosition<>>,
                             co::rules::position_needs_transactional_sink>);

kf::consumer_options input(const kf::mock_cluster& mc) {
  kf::consumer_options o{.topic = "orders", .config = mc.consumer_config()};
  o.config["group.id"] = "forwarders";
  return o;
}

kf::topic_sink_options output(const kf::mock_cluster& mc) {
  return kf::topic_sink_options{.config = mc.client_config(), .flush_timeout = 10s};
}

/// An order as a reader of the output topic sees it: the event, and where it sits.
struct seen final {
  order event;
  co::partition_id partition{0};
  std::int64_t offset = 0;
};

/// Every message of `topic` (all `partitions`), decoded, in offset order per partition.
std::vector<seen> read_orders(const kf::mock_cluster& mc, const std::string& topic,
                              int partitions) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  kf::properties p = mc.consumer_config();
  p.emplace("group.id", "reader-of-" + topic);
  p.emplace("enable.partition.eof", "true");
  for (const auto& [key, value] : p)
    REQUIRE(rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) ==
            RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE(rk != nullptr);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int k = 0; k < partitions; ++k)
    rd_kafka_topic_partition_list_add(list, topic.c_str(), k)->offset = RD_KAFKA_OFFSET_BEGINNING;
  REQUIRE(rd_kafka_assign(rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(list);
  std::vector<seen> out;
  int at_end = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (at_end < partitions && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      ++at_end;
    } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const auto* bytes = static_cast<const std::byte*>(m->payload);
      out.push_back(seen{kf::trivial_codec<order>::decode({bytes, m->len}),
                         co::partition_id{m->partition}, m->offset});
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  REQUIRE(at_end == partitions);
  return out;
}

/// How many times each (order, seq) of `sent` appears in `got`.
std::map<std::pair<std::int64_t, std::int64_t>, int> copies(const std::vector<seen>& got) {
  std::map<std::pair<std::int64_t, std::int64_t>, int> n;
  for (const seen& s : got)
    ++n[{s.event.order_id, s.event.seq}];
  return n;
}

bool committed_at(kf::offset_store& store, const produced& sent) {
  for (const auto& [k, v] : sent.by_partition)
    if (store.load(k) != co::position{static_cast<std::int64_t>(v.size())})
      return false;
  return true;
}

/// A consumer of partition 0 started again from the committed offsets, forwarding the rest of
/// `sent` in units of 10.
void forward_to_the_end(const kf::mock_cluster& mc, const produced& sent) {
  source_t src(input(mc), {p0});
  kf::offset_store store(src);
  sink_t sink(layout_t("out"), output(mc));
  pipeline_t p(src, sink, store, co::settings{.batch_size = 10});
  pump(p, [&] { return committed_at(store, sent); });
}

/// What configuration_refused says, for a sink built with `options`.
std::string refusal(const kf::topic_sink_options& options) {
  try {
    sink_t sink(layout_t("out"), options);
  } catch (const kf::configuration_refused& e) {
    return e.what();
  }
  return "(not refused)";
}

}  // namespace

TEST_CASE("topic_sink: refused at construction, naming the property, under any spelling") {
  kf::mock_cluster mc;
  const kf::topic_sink_options good = output(mc);
  for (const auto& [key, value, named] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"enable.idempotence", "false", "enable.idempotence"},
           {"acks", "1", "acks"},
           {"request.required.acks", "0", "acks"},
           {"topic.acks", "1", "acks"},
           {"topic.request.required.acks", "1", "acks"}}) {
    const std::string property = key;  // clang 14 cannot capture a structured binding
    CAPTURE(property);
    kf::topic_sink_options o = good;
    o.config[key] = value;
    const std::string why = refusal(o);
    CHECK(why.find(named) != std::string::npos);
    CHECK(why.find("topic_sink_options.config") != std::string::npos);
  }
  kf::topic_sink_options o = good;
  o.config["transactional.id"] = "orders-forwarder";
  CHECK(refusal(o).find("use kafka::transactional_sink") != std::string::npos);
  o = good;
  o.flush_timeout = 0ms;
  CHECK(refusal(o).find("flush_timeout must be positive") != std::string::npos);
  // What the sink sets anyway is not refused.
  o = good;
  o.config["acks"] = "all";
  o.config["enable.idempotence"] = "true";
  CHECK(refusal(o) == "(not refused)");
}

TEST_CASE("topic_sink: Kafka to Kafka at least once -- each record once when nothing fails") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  mc.create_topic("out", 2);
  produced sent;
  produce_orders(mc, "orders", 2, 300, 30, sent);
  source_t src(input(mc), {p0, p1});
  kf::offset_store store(src);
  sink_t sink(layout_t("out"), output(mc));
  pipeline_t p(src, sink, store, co::settings{.batch_size = 64});
  CHECK(pump(p, [&] { return committed_at(store, sent); }) == 300);
  CHECK(sink.produced() == 300);
  CHECK(sink.acknowledged() == 300);
  CHECK(sink.failed_deliveries() == 0);

  const std::vector<seen> got = read_orders(mc, "out", 2);
  CHECK(got.size() == 300);
  for (const auto& [id_seq, n] : copies(got))
    CHECK(n == 1);
  // Keyed by order id: an order's updates sit in one output partition, in their order.
  std::map<std::int64_t, std::pair<co::partition_id, std::int64_t>> last;
  for (const seen& s : got) {
    const auto it = last.find(s.event.order_id);
    if (it != last.end()) {
      CHECK(it->second.first == s.partition);
      CHECK(it->second.second < s.event.seq);
    }
    last[s.event.order_id] = {s.partition, s.event.seq};
  }
}

/// Crashes right after the write of the first unit that reaches past `past`: how many records a
/// poll hands over depends on what the client has fetched, so the unit is found by its end.
struct crash_after_write_past final {
  co::position past{};
  void at(const co::fault_point& p) {
    if (p.where == co::fault_point::kind::after_step && p.step == co::step_kind::write &&
        p.unit_end > past)
      throw co::injected_crash{p};
  }
};

TEST_CASE("topic_sink: a crash after the write and before the position appends a duplicate run") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  mc.create_topic("out", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 100, 100, sent);  // 100 orders, one update each
  std::int64_t from = 0;  // the crashed unit: [from, to), written and flushed, not committed
  std::int64_t to = 0;
  {
    source_t src(input(mc), {p0});
    kf::offset_store store(src);
    sink_t sink(layout_t("out"), output(mc));
    co::pipeline<source_t, sink_t, policy_t, co::with_store<kf::offset_store>,
                 co::with_faults<crash_after_write_past>>
        p(src, sink, store, co::settings{.batch_size = 10});
    // After a unit's write (flushed: the brokers have it), before its position.
    p.faults() = crash_after_write_past{co::position{20}};
    bool crashed = false;
    try {
      pump(p, [] { return false; });
    } catch (const co::injected_crash& c) {
      crashed = true;
      to = c.at.unit_end.value();
    }
    REQUIRE(crashed);
    REQUIRE(store.load(p0).has_value());
    from = store.load(p0)->value();
    CAPTURE(from);
    CAPTURE(to);
    CHECK(from <= 20);
    CHECK(to > 20);
    CHECK(to - from <= 10);
    CHECK(sink.acknowledged() == static_cast<std::size_t>(to));
  }
  forward_to_the_end(mc, sent);

  const std::vector<seen> got = read_orders(mc, "out", 1);
  const auto dup = static_cast<std::size_t>(to - from);
  // The crashed unit twice: nothing lost, its records duplicated.
  REQUIRE(got.size() == 100 + dup);
  const auto n = copies(got);
  const std::vector<order>& in = sent.by_partition[p0];
  for (std::size_t i = 0; i < in.size(); ++i) {
    CAPTURE(i);
    const bool in_unit = std::cmp_greater_equal(i, from) && std::cmp_less(i, to);
    CHECK(n.at({in[i].order_id, in[i].seq}) == (in_unit ? 2 : 1));
  }
  // A run, read again at new offsets: what an offset guard downstream cannot absorb.
  const auto f = static_cast<std::size_t>(from);
  for (std::size_t i = 0; i < dup; ++i) {
    CHECK(got[f + i].event == got[f + dup + i].event);
    CHECK(got[f + dup + i].offset == got[f + i].offset + static_cast<std::int64_t>(dup));
  }
}

TEST_CASE("topic_sink: a unit the brokers refuse is never committed, and is read again") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  mc.create_topic("out", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 50, 50, sent);
  {
    source_t src(input(mc), {p0});
    kf::offset_store store(src);
    sink_t sink(layout_t("out"), output(mc));
    pipeline_t p(src, sink, store, co::settings{.batch_size = 10});
    pump(p, [&] { return store.load(p0) == co::position{10}; });
    // The broker refuses the next produce requests for good (not retriable).
    mc.push_request_errors(produce_api, std::vector<rd_kafka_resp_err_t>(
                                            20, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED));
    std::string why;
    try {
      pump(p, [] { return false; });
    } catch (const std::exception& e) {
      why = e.what();
    }
    MESSAGE(why);
    CHECK(why.find("TOPIC_AUTHORIZATION_FAILED") != std::string::npos);
    CHECK(why.find("not committed") != std::string::npos);
    CHECK(store.load(p0) == co::position{10});  // never past a message the brokers lack
    CHECK(sink.failed_deliveries() >= 1);
    mc.clear_request_errors(produce_api);
  }
  forward_to_the_end(mc, sent);
  const auto n = copies(read_orders(mc, "out", 1));
  for (const order& o : sent.by_partition[p0])
    CHECK(n.count({o.order_id, o.seq}) == 1);
}

TEST_CASE("topic_sink: brokers that do not acknowledge within flush_timeout fail the unit") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  mc.create_topic("out", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 30, 30, sent);
  source_t src(input(mc), {p0});
  kf::offset_store store(src);
  kf::topic_sink_options o = output(mc);
  o.flush_timeout = 1500ms;
  sink_t sink(layout_t("out"), o);
  pipeline_t p(src, sink, store, co::settings{.batch_size = 10});
  pump(p, [&] { return store.load(p0) == co::position{10}; });
  // The record set the sink writes to is read from the broker the store also commits to: down,
  // the unit's messages wait, the flush gives up, and the position stays.
  std::optional<co::position> before = store.load(p0);
  mc.set_broker_down(1);
  bool timed_out = false;
  try {
    pump(
        p, [] { return false; }, 20s);
  } catch (const kf::client_error& e) {
    timed_out = std::string(e.what()).find("still unacknowledged") != std::string::npos;
    MESSAGE(std::string(e.what()));
  }
  CHECK(timed_out);
  mc.set_broker_up(1);
  CHECK(store.load(p0) == before);
}

namespace {
/// A value as large as the order's amount says, to make one record's message too large.
struct sized_layout final {
  std::int64_t too_large = 0;  // the order whose message is
  [[nodiscard]] std::string_view topic(const order&) const { return "out"; }
  void key(const order& o, std::vector<std::byte>& out) const {
    kf::big_endian_codec<std::int64_t>::encode(o.order_id, out);
  }
  void value(const order& o, std::vector<std::byte>& out) const {
    kf::trivial_codec<order>::encode(o, out);
    if (o.order_id == too_large)
      out.resize(50000);
  }
};
}  // namespace

TEST_CASE("topic_sink: a message too large is the record's: the records before it are committed") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  mc.create_topic("out", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 30, 30, sent);  // 30 orders, one update each
  source_t src(input(mc), {p0});
  kf::offset_store store(src);
  kf::topic_sink_options o = output(mc);
  o.config["message.max.bytes"] = "10000";
  using sized_sink = kf::topic_sink<order, sized_layout>;
  sized_sink sink(sized_layout{sent.by_partition[p0][14].order_id}, o);
  co::pipeline<source_t, sized_sink, policy_t, co::with_store<kf::offset_store>> p(
      src, sink, store, co::settings{.batch_size = 10});
  bool named = false;
  try {
    pump(p, [] { return false; });
  } catch (const co::record_failed& e) {
    named = e.failed() == co::offset{14};
    MESSAGE(std::string(e.what()));
  }
  CHECK(named);
  // The ten records of the first unit, and the four before the refused one in the second,
  // were acknowledged before the position covered them: a restart resumes at the record.
  CHECK(store.load(p0) == co::position{14});
  const std::vector<seen> got = read_orders(mc, "out", 1);
  CHECK(got.size() == 14);
}

TEST_CASE("topic_sink: a message the broker refuses for itself is the record's, named in order") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  mc.create_topic("out", 1);
  produced sent;
  produce_orders(mc, "orders", 1, 30, 30, sent);
  {
    source_t src(input(mc), {p0});
    kf::offset_store store(src);
    sink_t sink(layout_t("out"), output(mc));
    pipeline_t p(src, sink, store, co::settings{.batch_size = 10});
    pump(p, [&] { return store.load(p0) == co::position{10}; });
    // The broker refuses the second unit's produce request: every message in it is too large
    // for the topic, as the broker sees it (not retriable).
    mc.push_request_errors(
        produce_api, std::vector<rd_kafka_resp_err_t>(5, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));
    std::optional<co::offset> failed;
    try {
      pump(p, [] { return false; });
    } catch (const co::record_failed& e) {
      failed = e.failed();
      MESSAGE(std::string(e.what()));
    }
    REQUIRE(failed);
    CHECK(*failed == co::offset{10});  // the first of the unit's messages, in the unit's order
    CHECK(store.load(p0) == co::position{10});
    mc.clear_request_errors(produce_api);
  }
  forward_to_the_end(mc, sent);
  const auto n = copies(read_orders(mc, "out", 1));
  for (const order& o : sent.by_partition[p0])
    CHECK(n.count({o.order_id, o.seq}) == 1);
}

// ---- found by the review of the sink, kept as tests ---------------------------------------

namespace {

/// A user's wrapper (a metrics counter), written as wrappers of any other sink are: it restates
/// the wrapped sink's row type and capabilities and forwards apply(). It has no flush().
struct metered_sink {
  using row_type = order;
  using key_type = co::no_key;
  using capabilities = co::capabilities_of_t<sink_t>;
  sink_t* inner = nullptr;
  std::size_t rows = 0;
  void apply(co::partition_id k, co::offset o, const order& r) {
    ++rows;
    inner->apply(k, o, r);
  }
};

}  // namespace

// The conformance kit runs every pipeline over testing::recording_sink, "so the pipeline is built
// and judged as over the bare sink": it once dropped flush(), so the kit's pipelines never waited
// for an acknowledgement and its journal counted a row durable when apply() returned.
TEST_CASE("topic_sink: recording_sink (conformance kit) passes flush() on") {
  CHECK(co::flushing_sink<sink_t>);
  CHECK(co::flushing_sink<co::testing::recording_sink<sink_t, true>>);
  CHECK(co::flushing_sink<co::testing::recording_sink<sink_t, false>>);
}

// A wrapper that restates the capabilities and forwards apply() but not flush(): once legal
// (R3 accepted it through Emits) and never flushed, so the position passed messages the brokers
// refused (reproduced on the mock before Flushed/S30 existed). Now refused by S30.
TEST_CASE("topic_sink: a wrapper without flush() is refused") {
  CHECK(std::is_same_v<
        co::verdict_t<source_t, metered_sink, policy_t, co::with_store<kf::offset_store>>,
        co::rules::flush_not_callable>);
}

// flush() names the first record, in the unit's order, whose message the brokers do not have,
// and give_up commits the records before it. A unit the pipeline left without its flush (the
// world failed a later record) once left its entries in front of the next unit's: over several
// partitions the next unit need not hand them over in the same order, and a stale entry named
// first let the prefix commit pass a refused message. The loop now flushes such a unit to forget
// it (forget_unflushed); this is the sink's half: after a flush, nothing of before is counted.
TEST_CASE(
    "topic_sink audit: a unit forgotten by a flush is not blamed for the next one's failure") {
  kf::mock_cluster mc;
  mc.create_topic("out", 1);
  kf::topic_sink_options o = output(mc);
  o.config["linger.ms"] = "0";
  sink_t sink(layout_t("out"), o);
  const order x{1, 1, 100};
  const order y{2, 1, 200};

  // Unit A: P0:0 handed over and refused; the unit fails in the world before its flush, and
  // the pipeline then flushes to forget it (forget_unflushed in the loop), whatever it says.
  mc.push_request_errors(produce_api, {RD_KAFKA_RESP_ERR_INVALID_RECORD});
  sink.apply(p0, co::offset{0}, x);
  std::this_thread::sleep_for(1500ms);  // its produce request is answered (report not served)
  CHECK_THROWS(sink.flush());

  // Unit B, after recovery: P1:0 first, then P0:0 again.
  mc.push_request_errors(produce_api, {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED});
  sink.apply(p1, co::offset{0}, y);
  std::this_thread::sleep_for(1500ms);
  mc.clear_request_errors(produce_api);
  sink.apply(p0, co::offset{0}, x);

  std::string why;
  bool named_later_record = false;
  try {
    sink.flush();
  } catch (const co::row_failed& e) {
    named_later_record = e.partition() == p0;
    why = e.what();
  } catch (const std::exception& e) {
    why = e.what();
  }
  MESSAGE(why);
  // P1:0, first in this unit, was refused: nothing after it may be named as the first failure,
  // and nothing of unit A is counted as this unit's.
  CHECK_FALSE(named_later_record);
  CHECK(why.find("offset 0 of partition 1") != std::string::npos);
}

// flush_timeout is given to rd_kafka_flush as an int: above INT_MAX ms (~24.8 days; "wait as
// long as it takes" written as hours(24 * 30)) it wrapped negative, and every flush gave up at
// once. It is refused at construction instead, with the limit.
TEST_CASE("topic_sink: a flush_timeout above INT_MAX ms is refused, not wrapped") {
  kf::mock_cluster mc;
  mc.create_topic("out", 1);
  kf::topic_sink_options o = output(mc);
  o.flush_timeout = std::chrono::hours(24 * 30);
  std::string why;
  try {
    sink_t sink(layout_t("out"), o);
  } catch (const kf::configuration_refused& e) {
    why = e.what();
  }
  CHECK(why.find("at most 2147483647 ms") != std::string::npos);
}
