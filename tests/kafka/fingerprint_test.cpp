// SPDX-License-Identifier: BSL-1.0
// The Kafka source's side of a topic deleted and recreated (issue 21, item 4), on the sources
// alone, without a pipeline: record fingerprints (the same record has the same one in every
// consumer; a record that differs in its timestamp, key or value has another), and
// expect_before -- a partition started at p reads the record at p - 1 first, drops it when its
// fingerprint is the expected one, and stops with offset_reused when it is not. librdkafka's
// mock cluster cannot delete a topic: a second cluster holding a topic of the same name is the
// recreated one.
#include <doctest/doctest.h>

#include <librdkafka/rdkafka.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"

using namespace kafka_test;

namespace {

const co::partition_id p0{0};
const co::partition_id p1{1};

/// The events are the message values as text: any value decodes, an empty one too, and a null
/// one (a tombstone, which a value codec is never handed) as "(null)".
struct text_codec final {
  static std::string decode(const kf::message& m) {
    const auto value = m.value();
    if (!value)
      return "(null)";
    if (value->empty())
      return {};
    return std::string(reinterpret_cast<const char*>(value->data()), value->size());
  }
};

using policy_t = co::TransactionalPosition<>;
using assigned_t = kf::assigned_source<std::string, policy_t, text_codec>;
using group_t = kf::group_source<std::string, policy_t, text_codec>;

/// A message as produced: a key and a value, each possibly null, and a timestamp (0: the
/// producer's clock).
struct message final {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::int64_t timestamp = 0;
};

/// Produces `messages` to partition k of `topic`, in order, and waits until each is
/// acknowledged (kf::producer sends no keys nor timestamps).
void produce(const kf::mock_cluster& mc, const std::string& topic, co::partition_id k,
             const std::vector<message>& messages) {
  char err[512];
  kf::detail::conf_ptr conf(rd_kafka_conf_new());
  for (const auto& entry : mc.client_config())
    REQUIRE(rd_kafka_conf_set(conf.get(), entry.first.c_str(), entry.second.c_str(), err,
                              sizeof err) == RD_KAFKA_CONF_OK);
  // One in flight at a time: the messages keep their order in the partition.
  REQUIRE(rd_kafka_conf_set(conf.get(), "max.in.flight", "1", err, sizeof err) == RD_KAFKA_CONF_OK);
  static int failed = 0;
  failed = 0;
  rd_kafka_conf_set_dr_msg_cb(conf.get(), [](rd_kafka_t*, const rd_kafka_message_t* m, void*) {
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR)
      ++failed;
  });
  kf::detail::handle_ptr rk(rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err));
  REQUIRE(rk != nullptr);
  (void)conf.release();
  for (const message& m : messages) {
    std::array<rd_kafka_vu_t, 6> vu{};
    std::size_t n = 0;
    vu[n].vtype = RD_KAFKA_VTYPE_TOPIC;
    vu[n++].u.cstr = topic.c_str();
    vu[n].vtype = RD_KAFKA_VTYPE_PARTITION;
    vu[n++].u.i32 = k.value();
    vu[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vu[n++].u.i = RD_KAFKA_MSG_F_COPY;
    if (m.key) {  // absent: a null key (an empty one is a key of no bytes)
      vu[n].vtype = RD_KAFKA_VTYPE_KEY;
      vu[n].u.mem.ptr = const_cast<char*>(m.key->c_str());
      vu[n++].u.mem.size = m.key->size();
    }
    if (m.value) {
      vu[n].vtype = RD_KAFKA_VTYPE_VALUE;
      vu[n].u.mem.ptr = const_cast<char*>(m.value->c_str());
      vu[n++].u.mem.size = m.value->size();
    }
    if (m.timestamp != 0) {
      vu[n].vtype = RD_KAFKA_VTYPE_TIMESTAMP;
      vu[n++].u.i64 = m.timestamp;
    }
    kf::detail::error_ptr e{rd_kafka_produceva(rk.get(), vu.data(), n)};
    REQUIRE(!e);
  }
  REQUIRE(rd_kafka_flush(rk.get(), 30000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  REQUIRE(failed == 0);
}

/// `n` messages with values `prefix` + i, keyed by i.
void produce_numbered(const kf::mock_cluster& mc, const std::string& topic, co::partition_id k,
                      int n, const std::string& prefix) {
  std::vector<message> messages;
  for (int i = 0; i < n; ++i)
    messages.push_back(message{std::to_string(i), prefix + std::to_string(i)});
  produce(mc, topic, k, messages);
}

kf::consumer_options options_for(const kf::mock_cluster& mc, const std::string& topic) {
  return kf::consumer_options{.topic = topic, .config = mc.consumer_config()};
}

/// A record handed out, with its fingerprint when the source keeps them.
struct seen final {
  co::partition_id k;
  std::int64_t at;
  std::string value;
  std::optional<std::uint64_t> fingerprint;
};

/// Polls until `n` records were handed out (the test fails past `limit`).
template <class Source>
std::vector<seen> read(Source& src, std::size_t n, bool fingerprints,
                       std::chrono::milliseconds limit = 15s) {
  std::vector<seen> out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (out.size() < n) {
    if (std::chrono::steady_clock::now() > deadline) {
      FAIL("read " << out.size() << " records of " << n);
      break;
    }
    for (const auto& r : src.poll(64)) {
      out.push_back(seen{r.source_partition, r.source_offset.value(), r.event, std::nullopt});
      if (fingerprints)
        out.back().fingerprint = src.fingerprint(r);
    }
  }
  return out;
}

/// The fingerprint of every record of the topic's partitions, by partition and offset.
std::map<std::pair<std::int32_t, std::int64_t>, std::uint64_t> fingerprints_of(
    const kf::mock_cluster& mc, const std::string& topic, std::vector<co::partition_id> ks,
    std::size_t n) {
  assigned_t src(options_for(mc, topic), std::move(ks));
  src.keep_fingerprints();
  std::map<std::pair<std::int32_t, std::int64_t>, std::uint64_t> out;
  for (const seen& s : read(src, n, true))
    out[{s.k.value(), s.at}] = *s.fingerprint;
  return out;
}

/// Polls until the source throws offset_reused (returned) or `limit` passes (the test fails);
/// what was handed out before is appended to `handed_out`.
template <class Source>
std::optional<co::offset_reused> poll_until_reused(Source& src, std::vector<seen>& handed_out,
                                                   std::chrono::milliseconds limit = 15s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      for (const auto& r : src.poll(64))
        handed_out.push_back(seen{r.source_partition, r.source_offset.value(), r.event, {}});
    } catch (const co::offset_reused& e) {
      return e;
    }
  }
  FAIL("the source never stopped with offset_reused");
  return std::nullopt;
}

bool says(const std::string& message, const std::string& part) {
  INFO(message);
  return message.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("fingerprints: the same record has the same one in every consumer, another has another") {
  kf::mock_cluster mc;
  mc.create_topic("events", 1);
  const std::int64_t t = 1'700'000'000'000;  // the same timestamp, so that only what differs counts
  const std::string a = "a";
  const std::string x = "x";
  produce(mc, "events", p0,
          {
              message{a, x, t},             // 0
              message{a, x, t},             // 1: the same as 0, at another offset
              message{"b", x, t},           // 2: another key
              message{a, "y", t},           // 3: another value
              message{std::nullopt, x, t},  // 4: a null key
              message{"", x, t},            // 5: an empty key
              message{a, x, t + 1},         // 6: another timestamp
              message{"ax", "", t},         // 7: the same bytes, split otherwise
              message{a, std::nullopt, t},  // 8: a null value
              message{a, "", t},            // 9: an empty value
          });
  // Two consumers, each in its own process as far as librdkafka is concerned.
  const auto first = fingerprints_of(mc, "events", {p0}, 10);
  const auto second = fingerprints_of(mc, "events", {p0}, 10);
  REQUIRE(first.size() == 10);
  CHECK(first == second);
  const auto fp = [&](std::int64_t at) { return first.at({0, at}); };
  CHECK(fp(0) == fp(1));  // the offset is not part of it
  for (const std::int64_t other : {2, 3, 4, 5, 6, 7, 8, 9})
    CHECK_MESSAGE(fp(0) != fp(other), "record " << other);
  CHECK(fp(4) != fp(5));  // a null key is not an empty one
  CHECK(fp(8) != fp(9));  // nor a null value an empty one

  SUBCASE("only records of the last poll, and only when kept") {
    assigned_t src(options_for(mc, "events"), {p0});
    std::vector<std::string> events;
    while (events.empty())
      for (const auto& r : src.poll(4)) {
        CHECK_THROWS_AS((void)src.fingerprint(r), std::logic_error);  // not kept
        events.push_back(r.event);
      }
    src.keep_fingerprints();
    src.seek(p0, co::position{0});
    std::optional<kf::record<std::string>> copy;
    while (!copy)
      for (const auto& r : src.poll(4)) {
        CHECK(src.fingerprint(r) == fp(r.source_offset.value()));
        copy = r;
      }
    CHECK_THROWS_AS((void)src.fingerprint(*copy), std::logic_error);  // not in the batch
  }
}

TEST_CASE("expect_before, the right fingerprint: the record before p is read and dropped") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 2);
  produce_numbered(mc, "orders", p0, 150, "zero-");
  produce_numbered(mc, "orders", p1, 80, "one-");
  const auto fps = fingerprints_of(mc, "orders", {p0, p1}, 230);

  // Two partitions with an expectation at once: each starts at its p, nothing before it.
  assigned_t src(options_for(mc, "orders"), {p0, p1});
  src.expect_before(p0, co::position{100}, fps.at({0, 99}));
  src.expect_before(p1, co::position{50}, fps.at({1, 49}));
  src.seek(p0, co::position{100});
  src.seek(p1, co::position{50});
  std::map<std::int32_t, std::vector<std::int64_t>> offsets;
  for (const seen& s : read(src, 50 + 30, false)) {
    offsets[s.k.value()].push_back(s.at);
    CHECK(s.value == (s.k == p0 ? "zero-" : "one-") + std::to_string(s.at));
  }
  std::vector<std::int64_t> want0;
  std::vector<std::int64_t> want1;
  for (std::int64_t o = 100; o < 150; ++o)
    want0.push_back(o);
  for (std::int64_t o = 50; o < 80; ++o)
    want1.push_back(o);
  CHECK(offsets[0] == want0);
  CHECK(offsets[1] == want1);

  // The same starts with another fingerprint expected for partition 1: the record before 50 was
  // compared (the one above was not merely skipped). Partition 0 is read; nothing of 1 is.
  assigned_t other(options_for(mc, "orders"), {p0, p1});
  other.expect_before(p0, co::position{100}, fps.at({0, 99}));
  other.expect_before(p1, co::position{50}, fps.at({1, 48}));
  other.seek(p0, co::position{100});
  other.seek(p1, co::position{50});
  std::vector<seen> handed_out;
  const auto reused = poll_until_reused(other, handed_out);
  REQUIRE(reused);
  CHECK(reused->partition() == p1);
  CHECK(reused->stored() == co::position{50});
  CHECK(reused->at() == co::offset{49});
  std::int64_t next0 = 100;
  for (const seen& s : handed_out) {
    CHECK(s.k == p0);
    CHECK(s.at == next0++);
  }
}

TEST_CASE("expect_before, a recreated topic: offset_reused, nothing handed out, every time") {
  std::uint64_t before_100 = 0;
  {
    kf::mock_cluster old_cluster;
    old_cluster.create_topic("orders", 1);
    produce_numbered(old_cluster, "orders", p0, 100, "old-");
    before_100 = fingerprints_of(old_cluster, "orders", {p0}, 100).at({0, 99});
  }
  // The same name, 150 other records: position 100 would skip the first 100 of them.
  kf::mock_cluster recreated;
  recreated.create_topic("orders", 1);
  produce_numbered(recreated, "orders", p0, 150, "new-");
  assigned_t src(options_for(recreated, "orders"), {p0});
  src.expect_before(p0, co::position{100}, before_100);
  src.seek(p0, co::position{100});
  std::vector<seen> handed_out;
  for (int attempt = 0; attempt < 3; ++attempt) {
    CAPTURE(attempt);
    const auto reused = poll_until_reused(src, handed_out);
    REQUIRE(reused);
    const std::string what = reused->what();
    CHECK(says(what, "kafka topic 'orders'"));
    CHECK(says(what, "partition 0"));
    CHECK(says(what, "offset 99"));
    CHECK(says(what, "stored position 100"));
    CHECK(reused->source() == src.identity());
    CHECK(reused->partition() == p0);
    CHECK(reused->stored() == co::position{100});
    CHECK(reused->at() == co::offset{99});
    CHECK(handed_out.empty());
  }
  // The pipeline's decision to start elsewhere (the stored position removed) forgets the
  // expectation: that start reads from where it says, without a comparison.
  src.seek(p0, co::position{0});
  const auto all = read(src, 150, false);
  CHECK(all.front().at == 0);
  CHECK(all.back().at == 149);
  CHECK(all.back().value == "new-149");
}

TEST_CASE("expect_before at the edges of the log: retention took p - 1, or p is past the end") {
  // Records of 60 KiB: the mock keeps 5 MiB of a partition, so its earliest offset moves.
  kf::mock_cluster mc;
  mc.create_topic("blobs", 1);
  const std::string big(60 * 1024, 'b');
  std::vector<message> blobs;
  for (int i = 0; i < 100; ++i)
    blobs.push_back(message{std::to_string(i), big + std::to_string(i)});
  produce(mc, "blobs", p0, blobs);
  assigned_t probe(options_for(mc, "blobs"), {p0});
  const co::position earliest = probe.earliest(p0);
  REQUIRE(earliest > co::position{1});

  SUBCASE("the record before p deleted, p the earliest: nothing to compare, read from p") {
    assigned_t src(options_for(mc, "blobs"), {p0});
    src.expect_before(p0, earliest, 42);  // would not match, were it there
    src.seek(p0, earliest);
    const auto got = read(src, 3, false);
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(got[i].at == earliest.value() + static_cast<std::int64_t>(i));
  }
  SUBCASE("p itself deleted: position_lost names p, not p - 1") {
    const co::position p{earliest.value() - 1};
    assigned_t src(options_for(mc, "blobs"), {p0});
    src.expect_before(p0, p, 42);
    src.seek(p0, p);
    std::vector<seen> handed_out;
    try {
      (void)poll_until_reused(src, handed_out);
      FAIL("the start at p - 1 was not refused");
    } catch (const co::position_lost& e) {
      CHECK(e.stored() == p);
      CHECK(e.earliest() == earliest);
    }
    CHECK(handed_out.empty());
  }
  SUBCASE("p - 1 past the end: position_beyond_end names p") {
    const co::position end = probe.end(p0);
    const co::position p{end.value() + 2};
    assigned_t src(options_for(mc, "blobs"), {p0});
    src.expect_before(p0, p, 42);
    src.seek(p0, p);
    std::vector<seen> handed_out;
    try {
      (void)poll_until_reused(src, handed_out);
      FAIL("the start at p - 1 was not refused");
    } catch (const co::position_beyond_end& e) {
      CHECK(e.stored() == p);
      CHECK(e.end() == end);
    }
    CHECK(handed_out.empty());
  }
}

namespace {

/// A pipeline's part in the assignment protocol, reduced to what these tests need: every
/// partition starts at 100, with the fingerprint `before` expected of the record at 99,
/// registered inside `assigned` as the pipeline does.
struct expecting_listener final : co::assignment_listener {
  group_t* source = nullptr;
  std::uint64_t before = 0;
  int assignments = 0;

  std::vector<co::start_at> assigned(std::span<const co::partition_id> partitions,
                                     std::int32_t) override {
    ++assignments;
    std::vector<co::start_at> starts;
    for (const co::partition_id k : partitions) {
      source->expect_before(k, co::position{100}, before);
      starts.push_back(co::start_at{k, co::position{100}});
    }
    return starts;
  }
  void revoked(std::span<const co::partition_id>) override {}
  void lost(std::span<const co::partition_id>) override {}
};

}  // namespace

TEST_CASE("expect_before on a group member: checked at the assignment and at its redelivery") {
  kf::mock_cluster mc;
  mc.create_topic("orders", 1);
  produce_numbered(mc, "orders", p0, 150, "zero-");
  const auto fps = fingerprints_of(mc, "orders", {p0}, 150);

  group_t src(kf::consumer_options{.topic = "orders", .config = mc.group_config("ledger")});
  expecting_listener listener;
  listener.source = &src;
  listener.before = fps.at({0, 98});  // not the record at 99's
  src.listen(listener);
  // The assignment (the mock's first join takes 3 s): the record at 99 is compared.
  std::vector<seen> handed_out;
  const auto reused = poll_until_reused(src, handed_out, 20s);
  REQUIRE(reused);
  CHECK(listener.assignments == 1);
  CHECK(reused->stored() == co::position{100});
  CHECK(says(reused->what(), "kafka topic 'orders', group 'ledger'"));
  CHECK(handed_out.empty());

  // The pipeline recovers: listen again, and the member's partitions are delivered again,
  // this time with the right fingerprint. The record at 99 is read, dropped, and 100 is next.
  listener.before = fps.at({0, 99});
  src.listen(listener);
  const auto got = read(src, 50, false);
  CHECK(listener.assignments == 2);
  REQUIRE(got.size() == 50);
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(got[i].at == 100 + static_cast<std::int64_t>(i));
  src.close();
}

// A revoke drops the records of the revoked partitions from the batch being built (the
// rebalance callback runs inside rd_kafka_consumer_poll, in the middle of a batch); the
// fingerprints kept beside the batch are dropped at the same indices by erase_aligned. Making
// a rebalance land in the middle of a batch on the mock cluster depends on timing, so the
// helper is checked on its own here.
TEST_CASE("erase_aligned keeps the fingerprints beside the records they belong to") {
  std::vector<kf::record<std::string>> batch;
  std::vector<std::uint64_t> fingerprints;
  for (std::int32_t i = 0; i < 8; ++i) {
    batch.push_back(kf::record<std::string>{co::partition_id{i % 3}, co::offset{i},
                                            "event " + std::to_string(i)});
    fingerprints.push_back(1000 + static_cast<std::uint64_t>(i));
  }
  kf::detail::erase_aligned(batch, fingerprints, [](const kf::record<std::string>& r) {
    return r.source_partition == co::partition_id{1};
  });
  REQUIRE(batch.size() == 5);
  REQUIRE(fingerprints.size() == 5);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(batch[i].source_partition != co::partition_id{1});
    CHECK(fingerprints[i] == 1000 + static_cast<std::uint64_t>(batch[i].source_offset.value()));
    CHECK(batch[i].event == "event " + std::to_string(batch[i].source_offset.value()));
  }
  // Fingerprints not kept: the batch alone.
  std::vector<std::uint64_t> none;
  kf::detail::erase_aligned(batch, none, [](const kf::record<std::string>& r) {
    return r.source_partition == co::partition_id{0};
  });
  CHECK(batch.size() == 2);
  CHECK(none.empty());
}
