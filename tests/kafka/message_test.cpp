// SPDX-License-Identifier: BSL-1.0
// What a Kafka user expects of a source, against librdkafka's mock cluster: a decoder that
// reads the whole message (key, headers, timestamp, partition, offset), tombstones as typed
// deletes and never as values, and poison messages that go to the dead letters -- the position
// passing them only once the letter is written -- instead of stopping the consumer. Values in
// JSON through json::codec.
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <commit_order/adapters/json.hpp>

#include "support.hpp"

using namespace kafka_test;
namespace json = commit_order::json;

namespace {

const co::partition_id p0{0};
const co::partition_id p1{1};

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> b(s.size());
  if (!s.empty())
    std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::vector<std::byte> bytes_of(std::int64_t v) {
  std::vector<std::byte> b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

std::string text_of(kf::bytes_view b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

kf::message_copy make_message(std::optional<std::vector<std::byte>> key,
                              std::optional<std::vector<std::byte>> value,
                              std::vector<kf::message_copy::owned_header> headers = {}) {
  kf::message_copy m;
  m.key = std::move(key);
  m.value = std::move(value);
  m.headers = std::move(headers);
  return m;
}

kf::consumer_options options_for(const kf::mock_cluster& mc, const std::string& topic) {
  return kf::consumer_options{.topic = topic, .config = mc.consumer_config()};
}

/// Polls `src` until `n` records came, copying them out; fails the test after 20 s.
template <class Source>
auto poll_records(Source& src, std::size_t n) {
  std::vector<typename Source::record_type> got;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (got.size() < n) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    for (const auto& r : src.poll(64))
      got.push_back(r);
  }
  return got;
}

/// Polls `src` until it throws Error; returns what was handed out before.
template <class Error, class Source>
auto poll_until_thrown(Source& src, std::string& what) {
  std::vector<typename Source::record_type> got;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    try {
      for (const auto& r : src.poll(64))
        got.push_back(r);
    } catch (const Error& e) {
      what = e.what();
      return got;
    }
  }
}

// ---- a decoder of the whole message ----------------------------------------------------------

/// An event whose key, version and time come from the message, not its value.
struct account_event final {
  std::int64_t account = 0;  ///< from the message key (8 bytes)
  std::int64_t version = 0;  ///< from the last "version" header (decimal text)
  std::int64_t cents = 0;    ///< the value (8 bytes)
  std::int64_t time_ms = 0;
  bool log_append_time = true;
  std::int32_t partition = -1;
  std::int64_t at = -1;
  std::size_t headers = 0;
  bool null_trace = false;  ///< a "trace" header with no value
};

struct account_codec final {
  static account_event decode(const kf::message& m) {
    account_event e;
    const auto key = m.key();
    if (!key || key->size() != 8)
      throw std::invalid_argument("an account event needs an 8-byte key");
    std::memcpy(&e.account, key->data(), 8);
    const auto version = m.last_header("version");
    if (!version || !version->value)
      throw std::invalid_argument("an account event needs a version header");
    e.version = std::stoll(text_of(*version->value));
    e.cents = kf::trivial_codec<std::int64_t>::decode(*m.value());
    if (const auto t = m.timestamp()) {
      e.time_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(t->at.time_since_epoch()).count();
      e.log_append_time = t->log_append_time;
    }
    e.partition = m.partition().value();
    e.at = m.at().value();
    e.headers = m.header_count();
    const auto trace = m.last_header("trace");
    e.null_trace = trace && !trace->value;
    return e;
  }
};

}  // namespace

TEST_CASE("message decoder: the key, headers, timestamp, partition and offset reach the event") {
  kf::mock_cluster mc;
  mc.create_topic("accounts", 2);
  const auto created =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1'700'000'000'123));
  {
    kf::producer<std::int64_t> p(mc.client_config(), "accounts");
    for (std::int64_t i = 0; i < 6; ++i) {
      kf::message_copy m = make_message(
          bytes_of(std::int64_t{100 + i}), bytes_of(std::int64_t{i * 10}),
          {{"version", bytes_of("0")},
           {"trace", std::nullopt},
           {"version", bytes_of(std::to_string(i + 1))}});  // the last "version" counts
      m.timestamp = kf::timestamp{created + std::chrono::milliseconds(i)};
      p.send(i % 2 == 0 ? p0 : p1, m);
    }
    p.flush();
  }
  using source_t = kf::assigned_source<account_event, co::AtLeastOnce<>, account_codec>;
  source_t src(options_for(mc, "accounts"), {p0, p1});
  const auto got = poll_records(src, 6);
  for (const auto& r : got) {
    const account_event& e = r.event;
    const std::int64_t i = e.account - 100;
    INFO("account ", e.account);
    CHECK(e.cents == i * 10);
    CHECK(e.version == i + 1);
    CHECK(e.time_ms == 1'700'000'000'123 + i);
    CHECK_FALSE(e.log_append_time);
    CHECK(e.partition == r.source_partition.value());
    CHECK(e.partition == (i % 2 == 0 ? 0 : 1));
    CHECK(e.at == r.source_offset.value());
    CHECK(e.at == i / 2);
    CHECK(e.headers == 3);
    CHECK(e.null_trace);
  }
}

TEST_CASE("a tombstone stops a value codec's source, named, and is never read as an empty value") {
  kf::mock_cluster mc;
  mc.create_topic("names", 1);
  {
    kf::producer<std::string, kf::string_codec> p(mc.client_config(), "names");
    p.send(p0, "");  // an empty value is a value, first: before the producer has a buffer
    p.send(p0, "ada");
    p.send(p0, make_message(bytes_of("k"), std::nullopt));
    p.send(p0, "grace");
    p.flush();
  }
  // string_codec would read zero bytes as "": a delete must not become an empty name.
  kf::assigned_source<std::string, co::AtLeastOnce<>, kf::string_codec> src(
      options_for(mc, "names"), {p0});
  std::string what;
  const auto before = poll_until_thrown<kf::undecodable_message>(src, what);
  REQUIRE(before.size() == 2);
  CHECK(before[0].event.empty());
  CHECK(before[1].event == "ada");
  CHECK(what.find("offset 2 of partition 0") != std::string::npos);
  CHECK(what.find("tombstone") != std::string::npos);
  CHECK(what.find("kafka::with_deletes") != std::string::npos);
  // Still stopped at it the next time: never skipped.
  CHECK_THROWS_AS(poll_records(src, 1), kf::undecodable_message);
}

TEST_CASE("with_deletes: a tombstone is the typed delete of its key") {
  kf::mock_cluster mc;
  mc.create_topic("balances", 1);
  {
    kf::producer<std::int64_t> p(mc.client_config(), "balances");
    p.send(p0, make_message(bytes_of("alice"), bytes_of(std::int64_t{500})));
    p.send(p0, make_message(bytes_of("alice"), std::nullopt));
    p.send(p0, make_message(bytes_of("bob"), bytes_of(std::int64_t{0})));
    p.send(p0, make_message(bytes_of(""), std::nullopt));  // an empty key is a key
    p.send(p0, make_message(std::nullopt, std::nullopt));  // a null one deletes nothing
    p.flush();
  }
  using codec_t = kf::with_deletes<std::int64_t, std::string, kf::string_codec,
                                   kf::trivial_codec<std::int64_t>>;
  using change_t = kf::change<std::int64_t, std::string>;
  kf::assigned_source<change_t, co::AtLeastOnce<>, codec_t> src(options_for(mc, "balances"), {p0});
  std::string what;
  const auto got = poll_until_thrown<kf::undecodable_message>(src, what);
  REQUIRE(got.size() == 4);
  CHECK(got[0].event == change_t(std::int64_t{500}));
  CHECK(got[1].event == change_t(kf::deleted<std::string>{"alice"}));
  CHECK(got[2].event == change_t(std::int64_t{0}));
  CHECK(got[3].event == change_t(kf::deleted<std::string>{""}));
  CHECK(what.find("offset 4 of partition 0") != std::string::npos);
  CHECK(what.find("a tombstone with a null key") != std::string::npos);
}

// ---- poison messages ---------------------------------------------------------------------------

namespace {

struct payment final {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};
using payment_json = json::codec<
    payment, json::fields<json::field<"id", &payment::id>, json::field<"cents", &payment::cents>>>;
using payment_table = co::memory::table<
    payment, co::key<&payment::id>,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Transactional>>;

/// Two partitions of JSON payments, ids 1..40, with three poison messages: a cents of 12.5 (a
/// JSON library would truncate it), text that is not JSON, and a tombstone.
std::vector<kf::message_copy> produce_payments(const kf::mock_cluster& mc) {
  std::vector<kf::message_copy> poison;
  kf::producer<payment, payment_json> p(mc.client_config(), "payments");
  for (std::int64_t id = 1; id <= 40; ++id) {
    const co::partition_id k{static_cast<std::int32_t>(id % 2)};
    if (id == 7 || id == 20 || id == 33) {
      kf::message_copy m =
          make_message(bytes_of(std::to_string(id)),
                       id == 7    ? std::optional(bytes_of("{\"id\":7,\"cents\":12.5}"))
                       : id == 20 ? std::optional(bytes_of("{\"id\":20,"))
                                  : std::nullopt,
                       {{"source", bytes_of("till-3")}});
      m.partition = k;
      p.send(k, m);
      poison.push_back(m);
      continue;
    }
    p.send(k, payment{id, id * 100});
  }
  p.flush();
  return poison;
}

}  // namespace

TEST_CASE("tolerant: a poison message goes to the dead letters whole, and the rest is applied") {
  kf::mock_cluster mc;
  mc.create_topic("payments", 2);
  const std::vector<kf::message_copy> sent_poison = produce_payments(mc);

  using policy = co::TransactionalPosition<>;
  using source_t =
      kf::assigned_source<kf::decoded<payment>, policy, kf::tolerant<payment, payment_json>>;
  using letters_t = co::memory::dead_letters<kf::decoded<payment>>;
  source_t src(options_for(mc, "payments"), {p0, p1});
  payment_table table;
  letters_t letters;
  co::pipeline<source_t, payment_table, policy, co::with_transform<kf::decoded_value>,
               co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters_t>>
      p(src, table, letters, co::settings{.batch_size = 8});
  const auto done = [&] {
    return table.load_position(p0) == co::position{20} &&
           table.load_position(p1) == co::position{20};
  };
  CHECK(pump(p, done) == 40);

  CHECK(table.size() == 37);
  table.for_each(
      [](const co::memory::stored_row<payment>& r) { CHECK(r.row.cents == r.row.id * 100); });
  REQUIRE(letters.letters().size() == 3);
  for (const auto& l : letters.letters()) {
    const kf::poison* poison = l.event.poisoned();
    REQUIRE(poison != nullptr);
    const kf::message_copy& m = poison->message;
    INFO("letter at ", l.source_partition.value(), "/", l.source_offset.value());
    CHECK(m.partition == l.source_partition);
    CHECK(m.at == l.source_offset);
    CHECK(m.topic == "payments");
    REQUIRE(m.timestamp.has_value());
    // The letter holds the message as it was sent, byte for byte.
    bool found = false;
    for (const auto& s : sent_poison)
      found = found || (s.key == m.key && s.value == m.value && s.headers == m.headers &&
                        s.partition == m.partition);
    CHECK(found);
    CHECK(std::string(l.reason).find("cannot be decoded") != std::string::npos);
  }
  for (const auto& l : letters.letters())
    if (l.event.poisoned()->message.key == bytes_of("7"))
      CHECK(l.reason.find("JSON field \"cents\" is 12.5, not an integer") != std::string::npos);
}

TEST_CASE("tolerant under stop: the poison message stops the pipeline, named, and is not passed") {
  kf::mock_cluster mc;
  mc.create_topic("payments", 2);
  (void)produce_payments(mc);
  using policy = co::TransactionalPosition<>;
  using source_t =
      kf::assigned_source<kf::decoded<payment>, policy, kf::tolerant<payment, payment_json>>;
  // Partition 1 alone, so the first poison is known: id 7, offset 3 (ids 1, 3, 5, 7, ...).
  source_t src(options_for(mc, "payments"), {p1});
  payment_table table;
  co::pipeline<source_t, payment_table, policy, co::with_transform<kf::decoded_value>> p(
      src, table, co::settings{.batch_size = 8});
  try {
    (void)pump(
        p, [] { return false; }, 10s);
    FAIL("the poison message must stop the pipeline");
  } catch (const co::record_failed& e) {
    CHECK(e.failed() == co::offset{3});
    CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e),
                         doctest::Contains("the message at offset 3 of partition 1 cannot be "
                                           "decoded: JSON field \"cents\" is 12.5"),
                         kf::undecodable_message);
  }
  CHECK(table.load_position(p1) <= co::position{3});
  CHECK(table.find(7) == nullptr);
}

namespace {
/// A decoder whose lookup (a schema registry, say) is down.
struct lookup_down final {
  static std::int64_t decode(const kf::message&) {
    throw co::infrastructure_error("the schema registry is unreachable");
  }
};
}  // namespace

TEST_CASE("tolerant: the world's failure in a decoder stops the source, it is no poison") {
  // Found by review: caught as poison, a good record would be dead-lettered and passed.
  kf::mock_cluster mc;
  mc.create_topic("lookups", 1);
  {
    kf::producer<std::int64_t> p(mc.client_config(), "lookups");
    p.send(p0, std::int64_t{1});
    p.flush();
  }
  kf::assigned_source<kf::decoded<std::int64_t>, co::AtLeastOnce<>,
                      kf::tolerant<std::int64_t, lookup_down>>
      src(options_for(mc, "lookups"), {p0});
  std::string what;
  const auto got = poll_until_thrown<co::infrastructure_error>(src, what);
  CHECK(got.empty());
  CHECK(what == "the schema registry is unreachable");
}

TEST_CASE("with_deletes: a Java LongSerializer key, big-endian, deletes the key it names") {
  // Found by review: read with the machine's byte order, key 1 became 72057594037927936 and the
  // delete hit another key; KeyCodec has no default now.
  kf::mock_cluster mc;
  mc.create_topic("accounts", 1);
  std::vector<std::byte> one;
  kf::big_endian_codec<std::int64_t>::encode(1, one);
  CHECK(one == std::vector<std::byte>{std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0},
                                      std::byte{0}, std::byte{0}, std::byte{0}, std::byte{1}});
  {
    kf::producer<std::int64_t> p(mc.client_config(), "accounts");
    p.send(p0, make_message(one, std::nullopt));
    p.send(p0, make_message(bytes_of("acct-0001"), std::nullopt));  // 9 bytes: no long
    p.flush();
  }
  using codec_t = kf::with_deletes<std::int64_t, std::int64_t, kf::big_endian_codec<std::int64_t>>;
  using change_t = kf::change<std::int64_t, std::int64_t>;
  kf::assigned_source<change_t, co::AtLeastOnce<>, codec_t> src(options_for(mc, "accounts"), {p0});
  std::string what;
  const auto got = poll_until_thrown<kf::undecodable_message>(src, what);
  REQUIRE(got.size() == 1);
  CHECK(got[0].event == change_t(kf::deleted<std::int64_t>{1}));
  CHECK(what.find("offset 1") != std::string::npos);
  CHECK(what.find("big_endian_codec") != std::string::npos);
}
