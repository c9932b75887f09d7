// SPDX-License-Identifier: BSL-1.0
// The Kafka sources against a real broker (Kafka 4.4.0, one KRaft node the fixture started,
// its address in the file CO_KAFKA_BOOTSTRAP_FILE names): a consumer group into SQLite with
// the positions in the sink's transactions; a topic deleted and recreated under its name
// (offset_reused), and Kafka's committed offsets deleted with it; records deleted below a stored
// position by DeleteRecords or by segment retention (position_lost); transactional input under
// read_committed (the positions moved over markers and aborted records); a compacted topic; two
// members of a group under eager and cooperative-sticky assignment; a static member restarted. Most
// of it is what librdkafka 2.0.2's mock cluster cannot do: it has neither topic deletion nor
// DeleteRecords, it gets transactions wrong, and it ignores static membership. Every test uses
// topics and groups of its own, so the tests can share the broker and run in parallel.
#include <doctest/doctest.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <commit_order/adapters/json.hpp>
#include <commit_order/adapters/kafka.hpp>
#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/crash_after.hpp"
#include "support/lab/orders.hpp"
#include "support/lab/pg_server.hpp"
#include "support/scratch.hpp"

namespace {

namespace co = commit_order;
namespace kf = commit_order::kafka;
namespace sq = commit_order::sqlite;
namespace pg = commit_order::postgres;
namespace cj = commit_order::json;
using namespace std::chrono_literals;
using crash_lab::order_event;
using crash_lab::orders_flat;
using test_support::crash_after;
using sink_t = sq::guarded_upsert_sink<orders_flat>;
using policy_t = co::TransactionalPosition<>;
using group_t = kf::group_source<order_event, policy_t>;
using pipeline_t = co::pipeline<group_t, sink_t, policy_t>;

const co::partition_id p0{0};
const co::partition_id p1{1};

/// A name no other test (of this run or of an earlier run on the same broker) uses.
std::string unique(const std::string& base) {
  static std::atomic<int> n{0};
  return base + "-" + std::to_string(::getpid()) + "-" + std::to_string(++n);
}

/// The variable ctest sets for the tier, or a failure naming it.
std::string required_env(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE_MESSAGE(v != nullptr, name << " is not set (run through ctest)");
  return v;
}

/// The broker the fixture started (or the one whose address `file` holds), and the admin
/// requests the tests make of it.
class broker final {
 public:
  explicit broker(const std::string& file = required_env("CO_KAFKA_BOOTSTRAP_FILE")) {
    std::ifstream in(file);
    REQUIRE_MESSAGE(static_cast<bool>(in >> bootstrap_),
                    "no broker address in " << file << ": the fixture kafka_broker.start failed");
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap_.c_str(), err, sizeof err);
    // watermarks() asks for the high watermark, past any open transaction (librdkafka's
    // default, read_committed, would answer the last stable offset).
    rd_kafka_conf_set(conf, "isolation.level", "read_uncommitted", err, sizeof err);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    REQUIRE_MESSAGE(rk_ != nullptr, err);
    queue_ = rd_kafka_queue_new(rk_);
  }
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;
  ~broker() {
    rd_kafka_queue_destroy(queue_);
    rd_kafka_destroy(rk_);
  }

  [[nodiscard]] kf::properties client_config() const { return {{"bootstrap.servers", bootstrap_}}; }
  /// A producer that writes each message once: a retried request is deduplicated by the broker
  /// (a real broker can time a request out and still append it; the mock never does).
  [[nodiscard]] kf::properties producer_config() const {
    kf::properties p = client_config();
    p.emplace("enable.idempotence", "true");
    return p;
  }
  /// A group member's configuration: quick fetches, and a session short enough for a test
  /// (the fixture lets the broker accept sessions from 1 s).
  [[nodiscard]] kf::consumer_options consumer(const std::string& topic,
                                              const std::string& group) const {
    kf::consumer_options o{.topic = topic, .config = client_config()};
    o.config["group.id"] = group;
    o.config["session.timeout.ms"] = "6000";
    o.config["heartbeat.interval.ms"] = "500";
    o.config["fetch.wait.max.ms"] = "10";
    o.config["fetch.error.backoff.ms"] = "10";
    return o;
  }

  /// Creates `topic` with `partitions` partitions; retried while the broker still holds a
  /// deleted topic of that name.
  void create_topic(const std::string& topic, int partitions, const kf::properties& config = {}) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      char err[512];
      rd_kafka_NewTopic_t* nt =
          rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof err);
      REQUIRE_MESSAGE(nt != nullptr, err);
      for (const auto& [key, value] : config)
        REQUIRE(rd_kafka_NewTopic_set_config(nt, key.c_str(), value.c_str()) ==
                RD_KAFKA_RESP_ERR_NO_ERROR);
      rd_kafka_CreateTopics(rk_, &nt, 1, nullptr, queue_);
      rd_kafka_NewTopic_destroy(nt);
      event ev = wait_event();
      rd_kafka_resp_err_t e = rd_kafka_event_error(ev.get());
      std::string why = e ? rd_kafka_event_error_string(ev.get()) : "";
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
        std::size_t n = 0;
        const auto* results =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev.get()), &n);
        REQUIRE(n == 1);
        e = rd_kafka_topic_result_error(results[0]);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
          why = rd_kafka_topic_result_error_string(results[0]);
      }
      if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        break;
      REQUIRE_MESSAGE(e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS,
                      "creating " << topic << ": " << rd_kafka_err2name(e) << " " << why);
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                      "the deleted topic " << topic << " is still there after 30 s");
      std::this_thread::sleep_for(100ms);
    }
    // Until every partition has a leader, a producer's first sends can fail.
    wait_until("topic " + topic + " has leaders", [&] { return leaders(topic) == partitions; });
  }

  /// Deletes `topic` and waits until the broker no longer lists it.
  void delete_topic(const std::string& topic) {
    rd_kafka_DeleteTopic_t* dt = rd_kafka_DeleteTopic_new(topic.c_str());
    rd_kafka_DeleteTopics(rk_, &dt, 1, nullptr, queue_);
    rd_kafka_DeleteTopic_destroy(dt);
    event ev = wait_event();
    REQUIRE_MESSAGE(rd_kafka_event_error(ev.get()) == RD_KAFKA_RESP_ERR_NO_ERROR,
                    rd_kafka_event_error_string(ev.get()));
    std::size_t n = 0;
    const auto* results =
        rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev.get()), &n);
    REQUIRE(n == 1);
    REQUIRE_MESSAGE(rd_kafka_topic_result_error(results[0]) == RD_KAFKA_RESP_ERR_NO_ERROR,
                    rd_kafka_err2name(rd_kafka_topic_result_error(results[0])));
    wait_until("topic " + topic + " is gone", [&] { return leaders(topic) < 0; });
  }

  /// Deletes the records of `topic`'s partition `k` below offset `before` (DeleteRecords):
  /// the partition's log start moves to `before`.
  void delete_records(const std::string& topic, co::partition_id k, std::int64_t before) {
    rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic.c_str(), k.value())->offset = before;
    rd_kafka_DeleteRecords_t* dr = rd_kafka_DeleteRecords_new(l);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_DeleteRecords(rk_, &dr, 1, nullptr, queue_);
    rd_kafka_DeleteRecords_destroy(dr);
    event ev = wait_event();
    REQUIRE_MESSAGE(rd_kafka_event_error(ev.get()) == RD_KAFKA_RESP_ERR_NO_ERROR,
                    rd_kafka_event_error_string(ev.get()));
    const auto* done =
        rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev.get()));
    REQUIRE(done->cnt == 1);
    REQUIRE_MESSAGE(done->elems[0].err == RD_KAFKA_RESP_ERR_NO_ERROR,
                    rd_kafka_err2name(done->elems[0].err));
    CHECK(done->elems[0].offset == before);  // the new log start
  }

  /// Waits until partition k's end offset is `hi` (a transaction's markers are written after
  /// the commit or abort returns), or fails after 30 s naming what it is.
  void wait_end(const std::string& topic, co::partition_id k, std::int64_t hi) const {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    std::int64_t now = -1;
    while ((now = watermarks(topic, k).second) != hi) {
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                      "partition " << k.value() << "'s end is " << now << ", not " << hi);
      std::this_thread::sleep_for(20ms);
    }
  }

  /// The earliest and the end offset of `topic`'s partition `k`.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> watermarks(const std::string& topic,
                                                                 co::partition_id k) const {
    std::int64_t lo = -1, hi = -1;
    const auto e = rd_kafka_query_watermark_offsets(rk_, topic.c_str(), k.value(), &lo, &hi, 10000);
    REQUIRE_MESSAGE(e == RD_KAFKA_RESP_ERR_NO_ERROR, rd_kafka_err2name(e));
    return {lo, hi};
  }

 private:
  struct event_deleter {
    void operator()(rd_kafka_event_t* e) const { rd_kafka_event_destroy(e); }
  };
  using event = std::unique_ptr<rd_kafka_event_t, event_deleter>;

  event wait_event() {
    event ev{rd_kafka_queue_poll(queue_, 30000)};
    REQUIRE_MESSAGE(ev != nullptr, "the broker did not answer an admin request within 30 s");
    return ev;
  }

  /// How many of `topic`'s partitions have a leader; -1 when the broker does not list it.
  int leaders(const std::string& topic) {
    const struct rd_kafka_metadata* md = nullptr;
    const auto e = rd_kafka_metadata(rk_, 1, nullptr, &md, 10000);
    REQUIRE_MESSAGE(e == RD_KAFKA_RESP_ERR_NO_ERROR, rd_kafka_err2name(e));
    int out = -1;
    for (int i = 0; i < md->topic_cnt; ++i) {
      const auto& t = md->topics[i];
      if (topic != t.topic || t.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        continue;
      out = 0;
      for (int j = 0; j < t.partition_cnt; ++j)
        out += t.partitions[j].leader >= 0 ? 1 : 0;
    }
    rd_kafka_metadata_destroy(md);
    return out;
  }

  static void wait_until(const std::string& what, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!done()) {
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "not within 30 s: " << what);
      std::this_thread::sleep_for(50ms);
    }
  }

  std::string bootstrap_;
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_queue_t* queue_ = nullptr;
};

/// `n` events to each of partitions 0 and 1: the i-th of partition k is order
/// `seed + 2 i + k`, so every record is its own order and a table row names the one record it
/// came from. Returns the events by partition, in offset order.
std::map<co::partition_id, std::vector<order_event>> produce(const broker& b,
                                                             const std::string& topic,
                                                             std::int64_t n, std::int64_t seed) {
  std::map<co::partition_id, std::vector<order_event>> sent;
  kf::producer<order_event> prod(b.producer_config(), topic);
  for (std::int64_t i = 0; i < n; ++i)
    for (const co::partition_id k : {p0, p1}) {
      const order_event e{seed + 2 * i + k.value(), 100 + i % 7, 1000 + i, 1};
      prod.send(k, e);
      sent[k].push_back(e);
    }
  prod.flush();
  return sent;
}

/// Polls `p` until both partitions' positions in `sink` are `each`, or fails after 30 s;
/// returns the records handled.
std::size_t pump_to(pipeline_t& p, const sink_t& sink, std::int64_t each) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::size_t n = 0;
  while (sink.load_position(p0) != co::position{each} ||
         sink.load_position(p1) != co::position{each}) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                    "the positions did not reach " << each << " within 30 s");
    n += p.poll_once();
  }
  return n;
}

/// A producer on librdkafka's C API directly, for what kf::producer does not do: keys (a
/// compacted topic) and transactions (transactional.id set: every send is inside begin() ..
/// commit() or abort()). Every call waits for the broker's answer.
class raw_producer final {
 public:
  raw_producer(const broker& b, std::string topic, const std::string& transactional_id = "")
      : topic_(std::move(topic)) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    kf::properties p = b.producer_config();
    if (!transactional_id.empty()) {
      p.emplace("transactional.id", transactional_id);
      p.emplace("transaction.timeout.ms", "30000");
    }
    for (const auto& [key, value] : p)
      REQUIRE(rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) ==
              RD_KAFKA_CONF_OK);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    REQUIRE_MESSAGE(rk_ != nullptr, err);
    if (!transactional_id.empty())
      check("init_transactions", rd_kafka_init_transactions(rk_, 30000));
  }
  raw_producer(const raw_producer&) = delete;
  raw_producer& operator=(const raw_producer&) = delete;
  ~raw_producer() { rd_kafka_destroy(rk_); }

  void begin() { check("begin_transaction", rd_kafka_begin_transaction(rk_)); }
  void commit() { check("commit_transaction", rd_kafka_commit_transaction(rk_, 30000)); }
  void abort() { check("abort_transaction", rd_kafka_abort_transaction(rk_, 30000)); }

  /// Queues `e` for partition k, with `key` unless it is empty.
  void send(co::partition_id k, const order_event& e, const std::string& key = "") {
    std::vector<std::byte> value;
    kf::trivial_codec<order_event>::encode(e, value);
    rd_kafka_vu_t vu[5] = {};
    std::size_t n = 0;
    vu[n].vtype = RD_KAFKA_VTYPE_TOPIC;
    vu[n++].u.cstr = topic_.c_str();
    vu[n].vtype = RD_KAFKA_VTYPE_PARTITION;
    vu[n++].u.i32 = k.value();
    vu[n].vtype = RD_KAFKA_VTYPE_VALUE;
    vu[n].u.mem.ptr = value.data();
    vu[n++].u.mem.size = value.size();
    vu[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vu[n++].u.i = RD_KAFKA_MSG_F_COPY;
    if (!key.empty()) {
      vu[n].vtype = RD_KAFKA_VTYPE_KEY;
      vu[n].u.mem.ptr = const_cast<char*>(key.data());
      vu[n++].u.mem.size = key.size();
    }
    check("produce", rd_kafka_produceva(rk_, vu, n));
  }

  /// Waits until every message sent is acknowledged.
  void flush() {
    const auto e = rd_kafka_flush(rk_, 30000);
    REQUIRE_MESSAGE(e == RD_KAFKA_RESP_ERR_NO_ERROR, rd_kafka_err2name(e));
  }

 private:
  static void check(const char* what, rd_kafka_error_t* e) {
    if (e == nullptr)
      return;
    const std::string why = rd_kafka_error_string(e);
    rd_kafka_error_destroy(e);
    FAIL(std::string(what) << ": " << why);
  }

  std::string topic_;
  rd_kafka_t* rk_ = nullptr;
};

/// A broker of the test's own, started by the fixture's program (CO_KAFKA_FIXTURE) in a
/// folder of the test, for a test that crashes and restarts it; stopped when the test ends.
class own_broker final {
 public:
  explicit own_broker(const std::filesystem::path& dir)
      : info_((dir / "broker.bootstrap").string()) {
    run("start", true);
  }
  own_broker(const own_broker&) = delete;
  own_broker& operator=(const own_broker&) = delete;
  ~own_broker() { (void)std::system(command("stop", false).c_str()); }

  [[nodiscard]] const std::string& info() const noexcept { return info_; }
  /// SIGKILL: the broker's process dies, its data stays.
  void crash() { run("crash", false); }
  /// Started again from its data, on its ports; returns once it answers.
  void restart() { run("restart", true); }

 private:
  std::string command(const std::string& verb, bool jars) const {
    std::string c = "'" + required_env("CO_KAFKA_FIXTURE") + "' " + verb + " '" + info_ + "'";
    if (jars)
      c += " '" + required_env("CO_KAFKA_JARS") + "'";
    return c;
  }
  void run(const std::string& verb, bool jars) {
    const std::string c = command(verb, jars);
    REQUIRE_MESSAGE(std::system(c.c_str()) == 0, "failed: " << c);
  }
  std::string info_;
};

/// Polls `p` until `done()` holds, or fails after 30 s; returns the records handled.
template <class Pipeline, class Done>
std::size_t pump_until(Pipeline& p, const std::string& what, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::size_t n = 0;
  while (!done()) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "not within 30 s: " << what);
    n += p.poll_once();
  }
  return n;
}

/// Polls `p` until it throws an `Error` (returned) or 30 s pass (none); adds the records it
/// handled meanwhile to `applied`.
template <class Error, class Pipeline>
std::optional<Error> until_thrown(Pipeline& p, std::size_t& applied) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      applied += p.poll_once();
    } catch (const Error& e) {
      return e;
    }
  }
  return std::nullopt;
}

struct row final {
  order_event event;
  std::int64_t partition = -1, offset = -1;
};

std::map<std::int64_t, row> rows_of(sink_t& sink) {
  std::map<std::int64_t, row> rows;
  auto q = sink.database().prepare(
      "SELECT order_id, customer_id, total_cents, event_seq, source_partition, source_offset "
      "FROM orders_flat");
  while (q.step())
    rows[q.column_int64(0)] = {
        {q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)},
        q.column_int64(4),
        q.column_int64(5)};
  return rows;
}

/// Reads `topic` as a member of `group` into `sink` until both positions are `each`.
std::size_t consume(const broker& b, const std::string& topic, const std::string& group,
                    sink_t& sink, std::int64_t each) {
  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  const std::size_t n = pump_to(p, sink, each);
  src.close();
  return n;
}

}  // namespace

TEST_CASE("smoke: a consumer group reads 200 records into SQLite, each applied once") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("smoke");
  b.create_topic(topic, 2);
  const auto sent = produce(b, topic, 100, 1);
  CHECK(b.watermarks(topic, p0) == std::pair<std::int64_t, std::int64_t>{0, 100});
  CHECK(b.watermarks(topic, p1) == std::pair<std::int64_t, std::int64_t>{0, 100});

  sink_t sink(dir / "orders.sqlite");
  const std::string group = unique("smoke-readers");
  const auto t0 = std::chrono::steady_clock::now();
  // Every record handed to the sink once: 200 records polled for 200 offsets.
  CHECK(consume(b, topic, group, sink, 100) == 200);
  MESSAGE("200 records through a group member into SQLite in "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
          << " s (group join included)");

  // One row per record, each naming the partition and offset it came from.
  const auto rows = rows_of(sink);
  CHECK(rows.size() == 200);
  // (No structured binding: clang 14 cannot capture one in doctest's INFO lambdas.)
  for (const auto& sent_k : sent) {
    const co::partition_id k = sent_k.first;
    const std::vector<order_event>& events = sent_k.second;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const auto it = rows.find(events[i].order_id);
      REQUIRE_MESSAGE(it != rows.end(), "order " << events[i].order_id << " has no row");
      INFO("partition " << k.value() << ", offset " << i << ", order " << events[i].order_id);
      CHECK(it->second.event == events[i]);
      CHECK(it->second.partition == k.value());
      CHECK(it->second.offset == static_cast<std::int64_t>(i));
    }
  }
  CHECK(sink.load_position(p0) == co::position{100});
  CHECK(sink.load_position(p1) == co::position{100});

  // The group's next member resumes at the positions SQLite kept: only the new records.
  (void)produce(b, topic, 10, 10001);
  CHECK(consume(b, topic, group, sink, 110) == 20);
  CHECK(rows_of(sink).size() == 220);
  // Another group's member is refused the positions: they vouch for this group's reading. (Its
  // first generation is below the stored epoch, so the claim's fence refuses it first.)
  group_t other(b.consumer(topic, unique("smoke-others")));
  pipeline_t p(other, sink, co::settings{.batch_size = 16});
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool refused = false;
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    try {
      (void)p.poll_once();
    } catch (const co::position_bound_elsewhere&) {
      refused = true;
    } catch (const co::fenced&) {
      refused = true;
    }
  }
  CHECK(refused);
  CHECK(rows_of(sink).size() == 220);
  other.close();
}

// The sources read the record before a stored position back and compare it with the
// fingerprint the SQL sink kept beside the position. Without that the consumer would resume at
// the old positions and silently skip the recreated topic's first records.
TEST_CASE("a topic deleted and recreated under its name stops the consumer: offset_reused") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("recreated");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  (void)produce(b, topic, 30, 0);
  sink_t sink(dir / "orders.sqlite");
  CHECK(consume(b, topic, group, sink, 30) == 60);
  REQUIRE(rows_of(sink).size() == 60);

  // The same name, other records at the same offsets, more of them: resuming at 30 would skip
  // the new topic's first 30 records of each partition.
  b.delete_topic(topic);
  b.create_topic(topic, 2);
  (void)produce(b, topic, 45, 100000);

  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  std::size_t applied = 0;
  const std::optional<co::offset_reused> stopped = until_thrown<co::offset_reused>(p, applied);
  REQUIRE_MESSAGE(stopped.has_value(), "the recreated topic was read from the old positions ("
                                           << applied << " records applied)");
  const std::string what = stopped->what();
  CHECK(what.find("'" + topic + "'") != std::string::npos);
  CHECK((stopped->partition() == p0 || stopped->partition() == p1));
  CHECK(stopped->at() == co::offset{29});  // the record before the stored position 30
  CHECK(applied == 0);
  CHECK(rows_of(sink).size() == 60);
  CHECK(sink.load_position(p0) == co::position{30});
  CHECK(sink.load_position(p1) == co::position{30});
  src.close();
}

TEST_CASE(
    "records deleted past a stored position (DeleteRecords) are position_lost, by partition") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("retention");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  (void)produce(b, topic, 40, 0);
  sink_t sink(dir / "orders.sqlite");
  CHECK(consume(b, topic, group, sink, 40) == 80);

  // 20 more records in each partition, at offsets 40..59. Partition 0 loses records its
  // position has passed (harmless); partition 1 loses 40..49, which were never applied.
  (void)produce(b, topic, 20, 1000);
  b.delete_records(topic, p0, 30);
  b.delete_records(topic, p1, 50);
  CHECK(b.watermarks(topic, p0) == std::pair<std::int64_t, std::int64_t>{30, 60});
  CHECK(b.watermarks(topic, p1) == std::pair<std::int64_t, std::int64_t>{50, 60});

  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  std::size_t handled = 0;
  const std::optional<co::position_lost> lost = until_thrown<co::position_lost>(p, handled);
  REQUIRE_MESSAGE(lost.has_value(), "the consumer read on past records retention deleted");
  CHECK(lost->partition() == p1);
  CHECK(lost->stored() == co::position{40});
  CHECK(lost->earliest() == co::position{50});
  CHECK(std::string(lost->what()).find("partition 1") != std::string::npos);
  // Nothing of partition 1 applied past its position: no jump over the lost records.
  CHECK(sink.load_position(p1) == co::position{40});
  std::size_t rows_p1 = 0;
  for (const auto& [id, r] : rows_of(sink))
    rows_p1 += r.partition == 1 ? 1 : 0;
  CHECK(rows_p1 == 40);
  src.close();
}

TEST_CASE("records deleted past a stored position by segment retention are position_lost") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("segment-retention");
  const std::string group = unique("ledger");
  // Segments roll after 200 ms (at the next append) and are deleted 8 s after their last
  // record; the broker checks every second.
  b.create_topic(topic, 2, {{"segment.ms", "200"}, {"retention.ms", "8000"}});
  (void)produce(b, topic, 20, 0);
  sink_t sink(dir / "orders.sqlite");
  CHECK(consume(b, topic, group, sink, 20) == 40);

  // Records 20..39 of each partition are never applied: retention deletes their segment (and
  // the one before) while no consumer runs.
  std::this_thread::sleep_for(300ms);
  (void)produce(b, topic, 20, 1000);
  std::this_thread::sleep_for(300ms);
  (void)produce(b, topic, 20, 2000);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (b.watermarks(topic, p0).first < 40 || b.watermarks(topic, p1).first < 40) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                    "retention did not delete the first segments within 30 s");
    std::this_thread::sleep_for(200ms);
  }

  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  std::size_t handled = 0;
  const std::optional<co::position_lost> lost = until_thrown<co::position_lost>(p, handled);
  REQUIRE_MESSAGE(lost.has_value(), "the consumer read on past records retention deleted");
  CHECK(lost->stored() == co::position{20});
  CHECK(lost->earliest() >= co::position{40});
  CHECK(rows_of(sink).size() == 40);  // nothing applied past the stored positions
  CHECK(sink.load_position(p0) == co::position{20});
  CHECK(sink.load_position(p1) == co::position{20});
  src.close();
}

namespace {

/// Partition k's stored position, 0 when none.
std::int64_t stored(const sink_t& sink, co::partition_id k) {
  const auto p = sink.load_position(k);
  return p ? p->value() : 0;
}

/// Transactions into both partitions: `n` records each, order ids `seed + 2 i + k`, committed
/// or aborted. Returns what was sent, by partition.
std::map<co::partition_id, std::vector<order_event>> transaction(raw_producer& prod, std::int64_t n,
                                                                 std::int64_t seed, bool commit) {
  std::map<co::partition_id, std::vector<order_event>> sent;
  prod.begin();
  for (std::int64_t i = 0; i < n; ++i)
    for (const co::partition_id k : {p0, p1}) {
      const order_event e{seed + 2 * i + k.value(), 7, 100 + i, 1};
      prod.send(k, e);
      sent[k].push_back(e);
    }
  // Written before the end of the transaction: an abort would otherwise purge what is still
  // queued, and the aborted records would take no offsets.
  prod.flush();
  if (commit)
    prod.commit();
  else
    prod.abort();
  return sent;
}

/// Whether the rows of partition k are exactly `events`, each at its offset in `offsets`.
bool rows_are(sink_t& sink, co::partition_id k, const std::vector<order_event>& events,
              const std::vector<std::int64_t>& offsets) {
  REQUIRE(events.size() == offsets.size());
  std::map<std::int64_t, row> mine;
  for (const auto& [id, r] : rows_of(sink))
    if (r.partition == k.value())
      mine[id] = r;
  if (mine.size() != events.size())
    return false;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto it = mine.find(events[i].order_id);
    if (it == mine.end() || !(it->second.event == events[i]) || it->second.offset != offsets[i])
      return false;
  }
  return true;
}

template <class T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::int64_t> range(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = from; i < to; ++i)
    out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("transactional input: read_committed applies committed records once, none aborted") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("txn");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  raw_producer prod(b, topic, unique("txn-producer"));
  // Per partition: committed at 0..4 (its marker at 5), aborted at 6..8 (marker 9), committed
  // at 10..13 (marker 14).
  const auto t1 = transaction(prod, 5, 1000, true);
  (void)transaction(prod, 3, 2000, false);
  const auto t3 = transaction(prod, 4, 3000, true);
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 15);

  sink_t sink(dir / "orders.sqlite");
  std::size_t applied = 0;
  {
    group_t src(b.consumer(topic, group));
    pipeline_t p(src, sink, co::settings{.batch_size = 16});
    // The last committed record is at 13; the commit marker after it takes offset 14, and the
    // read position moves over it once the consumer has reached the partition's end (15). The
    // stored position stays at 14, just after the record the restart compares.
    applied = pump_until(p, "both read positions past the last marker", [&] {
      return p.progress(p0).read == co::position{15} && p.progress(p1).read == co::position{15};
    });
    for (const co::partition_id k : {p0, p1}) {
      INFO("partition " << k.value());
      // The positions stepped over the aborted records (6..8) and their marker: the last
      // record applied is 13, nothing is waited for in between.
      CHECK(rows_are(sink, k, concat(t1.at(k), t3.at(k)), concat(range(0, 5), range(10, 14))));
      const auto pr = p.progress(k);
      CHECK(stored(sink, k) == 14);
      CHECK(pr.read == co::position{15});
      CHECK(pr.committed == co::position{14});
      CHECK(pr.source_end == co::position{15});  // read_committed's end: the last stable offset
      // Neither the marker nor the aborted records count as records still to read, to apply
      // or to commit.
      CHECK(pr.records_end == co::position{14});
      CHECK(pr.unread() == 0);
      CHECK(pr.uncommitted() == 0);
      REQUIRE(pr.unapplied());
      CHECK(*pr.unapplied() == 0);
    }
    src.close();
  }
  CHECK(applied == 18);  // each committed record handed to the sink once, no aborted one

  // A restart: the next member resumes at the stored positions, reads nothing again, and
  // applies the next committed transaction (15..16, marker 17) as soon as it is there.
  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  applied = pump_until(p, "the restarted member owns both partitions",
                       [&] { return src.assignment().size() == 2; });
  const auto t4 = transaction(prod, 2, 4000, true);
  applied += pump_until(p, "both read positions past the next transaction's marker", [&] {
    return p.progress(p0).read == co::position{18} && p.progress(p1).read == co::position{18};
  });
  CHECK(applied == 4);
  for (const co::partition_id k : {p0, p1})
    CHECK(stored(sink, k) == 17);

  // A transaction still open: its records are in the log (the high watermark is 19) but past
  // the last stable offset (18); they are not handed out, and the end the pipeline sees is 18.
  prod.begin();
  for (const co::partition_id k : {p0, p1})
    prod.send(k, order_event{5000 + k.value(), 7, 1, 1});
  prod.flush();
  for (const co::partition_id k : {p0, p1}) {
    b.wait_end(topic, k, 19);
    CHECK(p.progress(k).source_end == co::position{18});
  }
  for (int i = 0; i < 5; ++i)
    applied += p.poll_once();
  CHECK(applied == 4);
  for (const co::partition_id k : {p0, p1}) {
    CHECK(p.progress(k).read == co::position{18});  // the open transaction is not passed over
    CHECK(p.progress(k).unread() == 0);
  }
  // Aborted at the tail: the record at 18 and the abort marker at 19 are passed over, and
  // nothing is counted as still to read.
  prod.abort();
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 20);
  applied += pump_until(p, "both read positions past the aborted tail", [&] {
    return p.progress(p0).read == co::position{20} && p.progress(p1).read == co::position{20};
  });
  CHECK(applied == 4);
  for (const co::partition_id k : {p0, p1}) {
    INFO("partition " << k.value());
    CHECK(rows_are(sink, k, concat(concat(t1.at(k), t3.at(k)), t4.at(k)),
                   concat(concat(range(0, 5), range(10, 14)), range(15, 17))));
    const auto pr = p.progress(k);
    CHECK(stored(sink, k) == 17);
    CHECK(pr.read == co::position{20});
    CHECK(pr.records_end == co::position{17});  // one run: marker 17, aborted 18, marker 19
    CHECK(pr.source_end == co::position{20});
    CHECK(pr.unread() == 0);
    CHECK(pr.uncommitted() == 0);
    CHECK(pr.unapplied() == 0);
  }
  src.close();
}

TEST_CASE(
    "a topic recreated with a transaction marker before the stored position is not detected: "
    "its first records are skipped") {
  // What the fingerprint check cannot see (docs/adapters.md): the record before the stored
  // position is compared only when it is there to read, and a transaction's marker is never
  // delivered. This test pins today's behaviour: if it starts failing because the source now
  // stops such a topic with offset_reused, the limitation is gone -- rename and invert it.
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("recreated-txn");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  (void)produce(b, topic, 30, 0);
  sink_t sink(dir / "orders.sqlite");
  CHECK(consume(b, topic, group, sink, 30) == 60);

  // The recreated topic: committed records at 0..28, the marker at 29 -- the offset of the
  // record the stored positions (30) were committed after -- then committed records at 30..39.
  b.delete_topic(topic);
  b.create_topic(topic, 2);
  raw_producer prod(b, topic, unique("txn-producer"));
  const auto first = transaction(prod, 29, 100000, true);
  const auto next = transaction(prod, 10, 200000, true);
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 41);

  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  std::size_t applied = 0;
  CHECK_NOTHROW(applied = pump_until(p, "both positions at 40", [&] {
                  return stored(sink, p0) == 40 && stored(sink, p1) == 40;
                }));
  CHECK(applied == 20);  // 30..39 of each partition, read on without a comparison
  const auto rows = rows_of(sink);
  CHECK(rows.size() == 80);
  for (const co::partition_id k : {p0, p1}) {
    INFO("partition " << k.value());
    for (const order_event& e : first.at(k))
      CHECK(rows.count(e.order_id) == 0);  // the new topic's 0..28: never applied
    for (std::size_t i = 0; i < next.at(k).size(); ++i)
      CHECK(rows.at(next.at(k)[i].order_id).offset == static_cast<std::int64_t>(30 + i));
  }
  src.close();
}

namespace {

/// `count` transactions of one record in each partition, committed: records at even offsets,
/// each transaction's commit marker at the odd offset after it.
std::map<co::partition_id, std::vector<order_event>> single_record_transactions(raw_producer& prod,
                                                                                int count,
                                                                                std::int64_t seed) {
  std::map<co::partition_id, std::vector<order_event>> sent;
  for (int i = 0; i < count; ++i)
    for (auto& [k, v] : transaction(prod, 1, seed + 2 * i, true))
      sent[k].insert(sent[k].end(), v.begin(), v.end());
  return sent;
}

}  // namespace

// The read position moves over a commit marker; the stored one stays just after the last
// record, so that a restart can read that record back and compare it. Stored past the marker,
// the offset before it would be the marker, which no consumer receives: nothing would be
// compared, and a recreated topic would be read from the old positions (found by an audit:
// records at 0, 2, ..., markers at 1, 3, ..., recreated the same way).
TEST_CASE(
    "a topic of one-record transactions recreated under its name is stopped with offset_reused "
    "after its positions moved over the last marker") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("recreated-after-marker");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  {
    raw_producer prod(b, topic, unique("txn-producer"));
    (void)single_record_transactions(prod, 5, 1000);  // records 0, 2, ..., 8; markers 1, ..., 9
  }
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 10);
  sink_t sink(dir / "orders.sqlite");
  {
    group_t src(b.consumer(topic, group));
    pipeline_t p(src, sink, co::settings{.batch_size = 16});
    CHECK(pump_until(p, "both read positions past the last marker", [&] {
            return p.progress(p0).read == co::position{10} &&
                   p.progress(p1).read == co::position{10};
          }) == 10);
    CHECK(stored(sink, p0) == 9);
    CHECK(stored(sink, p1) == 9);
    src.close();
  }
  // The same name, the same producer pattern, other records: a marker at 9 again.
  b.delete_topic(topic);
  b.create_topic(topic, 2);
  {
    raw_producer prod(b, topic, unique("txn-producer"));
    (void)single_record_transactions(prod, 10, 100000);
  }
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 20);

  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  std::size_t applied = 0;
  const std::optional<co::offset_reused> stopped = until_thrown<co::offset_reused>(p, applied);
  REQUIRE_MESSAGE(stopped.has_value(), "the recreated topic was read from the old positions ("
                                           << applied << " records applied)");
  CHECK(stopped->at() == co::offset{8});  // the last record before the stored position
  CHECK(applied == 0);
  CHECK(rows_of(sink).size() == 10);
  src.close();
}

TEST_CASE(
    "a topic recreated with plain records after its positions moved over a commit marker is "
    "stopped with offset_reused") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("recreated-plain-after-marker");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  {
    raw_producer prod(b, topic, unique("txn-producer"));
    (void)transaction(prod, 14, 1000, true);  // 0..13, marker 14
  }
  sink_t sink(dir / "orders.sqlite");
  {
    group_t src(b.consumer(topic, group));
    pipeline_t p(src, sink, co::settings{.batch_size = 16});
    CHECK(pump_until(p, "both read positions past the marker", [&] {
            return p.progress(p0).read == co::position{15} &&
                   p.progress(p1).read == co::position{15};
          }) == 28);
    src.close();
  }
  b.delete_topic(topic);
  b.create_topic(topic, 2);
  (void)produce(b, topic, 40, 100000);

  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  std::size_t applied = 0;
  const std::optional<co::offset_reused> stopped = until_thrown<co::offset_reused>(p, applied);
  REQUIRE_MESSAGE(stopped.has_value(), "the recreated topic was read from the old positions ("
                                           << applied << " records applied)");
  CHECK(stopped->at() == co::offset{13});
  CHECK(applied == 0);
  CHECK(rows_of(sink).size() == 28);
  src.close();
}

TEST_CASE("after a restart, progress counts neither the marker nor the aborted tail behind it") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("restart-progress");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  {
    raw_producer prod(b, topic, unique("txn-producer"));
    (void)transaction(prod, 5, 1000, true);   // 0..4, marker 5
    (void)transaction(prod, 3, 2000, false);  // aborted 6..8, marker 9
  }
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 10);
  sink_t sink(dir / "orders.sqlite");
  {
    group_t src(b.consumer(topic, group));
    pipeline_t p(src, sink, co::settings{.batch_size = 16});
    (void)pump_until(p, "both read positions at 10", [&] {
      return p.progress(p0).read == co::position{10} && p.progress(p1).read == co::position{10};
    });
    for (const co::partition_id k : {p0, p1})
      REQUIRE(p.progress(k).unapplied() == 0);
    src.close();
  }
  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  (void)pump_until(p, "the restarted member past the gap again", [&] {
    return p.progress(p0).read == co::position{10} && p.progress(p1).read == co::position{10};
  });
  for (const co::partition_id k : {p0, p1}) {
    INFO("partition " << k.value());
    const auto pr = p.progress(k);
    CHECK(pr.unread() == 0);
    CHECK(pr.uncommitted() == 0);
    CHECK(pr.unapplied() == 0);  // every committed record is in the sink
  }
  // An aborted transaction right after: one run of offsets with no record, 5..13.
  {
    raw_producer prod(b, topic, unique("txn-producer"));
    (void)transaction(prod, 3, 3000, false);  // aborted 10..12, marker 13
  }
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 14);
  (void)pump_until(p, "both read positions at 14", [&] {
    return p.progress(p0).read == co::position{14} && p.progress(p1).read == co::position{14};
  });
  for (const co::partition_id k : {p0, p1}) {
    INFO("partition " << k.value());
    const auto pr = p.progress(k);
    CHECK(pr.records_end == co::position{5});  // the last record is at 4
    CHECK(pr.unread() == 0);
    CHECK(pr.uncommitted() == 0);
    CHECK(pr.unapplied() == 0);
  }
  src.close();
}

namespace {

/// The offsets partition k of `topic` holds now, read from its log start to its end by a plain
/// consumer (no group, nothing committed).
std::vector<std::int64_t> offsets_in(const broker& b, const std::string& topic,
                                     co::partition_id k) {
  const auto wm = b.watermarks(topic, k);
  const std::int64_t lo = wm.first;
  const std::int64_t hi = wm.second;
  std::vector<std::int64_t> out;
  if (lo == hi)
    return out;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [key, value] : b.client_config())
    REQUIRE(rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) ==
            RD_KAFKA_CONF_OK);
  REQUIRE(rd_kafka_conf_set(conf, "group.id", "offsets-reader", err, sizeof err) ==
          RD_KAFKA_CONF_OK);
  REQUIRE(rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err) ==
          RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE_MESSAGE(rk != nullptr, err);
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t* l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, topic.c_str(), k.value())->offset = lo;
  rd_kafka_assign(rk, l);
  rd_kafka_topic_partition_list_destroy(l);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (out.empty() || out.back() < hi - 1) {
    if (std::chrono::steady_clock::now() > deadline)
      break;
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
      out.push_back(m->offset);
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  REQUIRE_MESSAGE((!out.empty() && out.back() == hi - 1),
                  "could not read " << topic << " to " << hi);
  return out;
}

}  // namespace

TEST_CASE("a compacted topic: positions pass the offsets compaction removed, nothing waits") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("compacted");
  const std::string group = unique("ledger");
  // Segments roll at the first append 100 ms after they began; the cleaner (its backoff is
  // 100 ms on the fixture's broker) then compacts every segment but the active one.
  b.create_topic(topic, 1,
                 {{"cleanup.policy", "compact"},
                  {"segment.ms", "100"},
                  {"min.cleanable.dirty.ratio", "0.01"},
                  {"min.compaction.lag.ms", "0"}});
  raw_producer prod(b, topic);
  std::map<std::int64_t, order_event> sent;  // by offset
  std::int64_t next = 0;
  const auto send = [&](const std::string& key) {
    const order_event e{next + 1, 7, 100 + next, 1};
    prod.send(p0, e, key);
    sent[next++] = e;
  };
  // 0..9 keys a0..a9, 10..14 keys b0..b4: read and stored at position 15.
  for (int i = 0; i < 10; ++i)
    send("a" + std::to_string(i));
  for (int i = 0; i < 5; ++i)
    send("b" + std::to_string(i));
  prod.flush();
  sink_t sink(dir / "orders.sqlite");
  {
    group_t src(b.consumer(topic, group));
    pipeline_t p(src, sink, co::settings{.batch_size = 16});
    CHECK(pump_until(p, "position 15", [&] { return stored(sink, p0) == 15; }) == 15);
    src.close();
  }
  // 15..19 keys b5..b9, 20..29 keys b0..b9 again, 30..39 keys c0..c9: compaction removes
  // 10..19, and the stored position 15 falls in the gap.
  for (int i = 5; i < 10; ++i)
    send("b" + std::to_string(i));
  for (int i = 0; i < 10; ++i)
    send("b" + std::to_string(i));
  for (int i = 0; i < 10; ++i)
    send("c" + std::to_string(i));
  prod.flush();
  // Records with keys of their own (never compacted away) roll the segment until the cleaner
  // has removed 10..19.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::int64_t> present;
  for (int roll = 0;; ++roll) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < t0 + 20s,
                    "the log cleaner did not compact " << topic << " within 20 s");
    std::this_thread::sleep_for(150ms);  // past segment.ms: the next append rolls
    send("roll" + std::to_string(roll));
    prod.flush();
    present = offsets_in(b, topic, p0);
    if (std::ranges::none_of(present, [](std::int64_t o) { return o >= 10 && o < 20; }))
      break;
  }
  MESSAGE("compacted in "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s, "
          << present.size() << " of " << next << " offsets left");
  const std::int64_t end = next;
  CHECK(b.watermarks(topic, p0) == std::pair<std::int64_t, std::int64_t>{0, end});
  CHECK(present.size() == static_cast<std::size_t>(end - 10));  // only 10..19 went

  // The member resumes at 15, inside the gap: it reads on from 20 (there is no record 14 to
  // compare), applies every record there once and stores the end as its position.
  const auto resume = [&](sink_t& into, const std::string& g, std::int64_t from) {
    group_t src(b.consumer(topic, g));
    pipeline_t p(src, into, co::settings{.batch_size = 16});
    const std::size_t n =
        pump_until(p, "the position at the end", [&] { return stored(into, p0) == end; });
    CHECK(p.progress(p0).unread() == 0);
    src.close();
    std::vector<std::int64_t> want;
    for (const std::int64_t o : present)
      if (o >= from)
        want.push_back(o);
    CHECK(n == want.size());
    return want;
  };
  (void)resume(sink, group, 15);
  auto rows = rows_of(sink);
  CHECK(rows.size() == 15 + present.size() - 10);
  for (const auto& [id, r] : rows)
    CHECK(sent.at(r.offset) == r.event);
  // A new group reads the compacted partition from its start: exactly the records there.
  sink_t fresh(dir / "fresh.sqlite");
  (void)resume(fresh, unique("fresh"), 0);
  rows = rows_of(fresh);
  CHECK(rows.size() == present.size());
  for (const std::int64_t o : present)
    CHECK(rows.at(sent.at(o).order_id).offset == o);
}

namespace {

/// Two members of a group under the assignment `strategy`: the second joins a member that owns
/// both partitions, they share them, then the first leaves and the second takes its partition
/// over where it was left. Every record is applied once, at its offset.
void two_members(const std::string& strategy) {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("group");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  (void)produce(b, topic, 50, 0);
  // Two members, each with its own connection to one SQLite file.
  sink_t sink_a(dir / "orders.sqlite");
  sink_t sink_b(dir / "orders.sqlite");
  kf::consumer_options o = b.consumer(topic, group);
  o.config["partition.assignment.strategy"] = strategy;
  group_t a(o);
  pipeline_t pa(a, sink_a, co::settings{.batch_size = 16});
  std::size_t applied = pump_until(pa, "the first member owns both partitions",
                                   [&] { return a.assignment().size() == 2; });
  group_t m(o);
  pipeline_t pb(m, sink_b, co::settings{.batch_size = 16});
  const auto both = [&](const std::string& what, const auto& done) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!done()) {
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "not within 30 s: " << what);
      applied += pa.poll_once();
      applied += pb.poll_once();
    }
  };
  both("one partition each, both at 50", [&] {
    return a.assignment().size() == 1 && m.assignment().size() == 1 && stored(sink_a, p0) == 50 &&
           stored(sink_a, p1) == 50;
  });
  // Eager: both act on the generation of the last rebalance. Cooperative: a member whose
  // assignment the last round left alone is told nothing, and acts on the generation it got
  // its partition in.
  if (strategy == "range")
    CHECK(a.generation() == m.generation());
  CHECK(a.assignment() != m.assignment());
  (void)produce(b, topic, 20, 1000);
  both("both at 70", [&] { return stored(sink_a, p0) == 70 && stored(sink_a, p1) == 70; });
  // The first member leaves: the other takes its partition over where it was left.
  a.close();
  (void)produce(b, topic, 20, 2000);
  applied += pump_until(pb, "the second member owns both partitions, both at 90", [&] {
    return m.assignment().size() == 2 && stored(sink_b, p0) == 90 && stored(sink_b, p1) == 90;
  });
  CHECK(applied == 180);  // every record handed to a sink once, across two rebalances
  const auto rows = rows_of(sink_b);
  CHECK(rows.size() == 180);
  for (const auto& [id, r] : rows)
    CHECK(r.offset == (id % 1000) / 2 + (id >= 2000 ? 70 : id >= 1000 ? 50 : 0));
  m.close();
}

}  // namespace

TEST_CASE("two members of a group (eager range) share the partitions across a join and a leave") {
  two_members("range");
}

TEST_CASE(
    "two members of a group (cooperative-sticky) share the partitions across a join and a "
    "leave") {
  two_members("cooperative-sticky");
}

TEST_CASE(
    "a static member (group.instance.id) closed and restarted within its session keeps its "
    "partitions and its generation: no rebalance") {
  broker b;
  test_support::scratch_dir dir;
  const std::string topic = unique("static");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  (void)produce(b, topic, 30, 0);
  sink_t sink(dir / "orders.sqlite");
  kf::consumer_options o = b.consumer(topic, group);
  o.config["group.instance.id"] = unique("instance");
  std::optional<std::int32_t> first;
  std::size_t applied = 0;
  {
    group_t src(o);
    pipeline_t p(src, sink, co::settings{.batch_size = 16});
    applied = pump_until(p, "both at 30", [&] {
      return src.assignment().size() == 2 && stored(sink, p0) == 30 && stored(sink, p1) == 30;
    });
    first = src.generation();
    src.close();
  }
  REQUIRE(first.has_value());
  (void)produce(b, topic, 10, 1000);
  group_t src(o);
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  applied += pump_until(p, "both at 40", [&] {
    return src.assignment().size() == 2 && stored(sink, p0) == 40 && stored(sink, p1) == 40;
  });
  // The group kept the member's assignment: no LeaveGroup was sent, nothing rebalanced.
  CHECK(src.generation() == first);
  CHECK(applied == 80);
  CHECK(rows_of(sink).size() == 80);
  src.close();
}

namespace {
// AtLeastOnce with the positions in Kafka's committed offsets (kafka::offset_store). Kafka's
// offsets are Replicated; rule R9a wants a sink at least as durable (declared here).
using al_policy = co::AtLeastOnce<>;
using al_source = kf::group_source<order_event, al_policy>;
using table_t = co::memory::table<
    order_event, co::key<&order_event::order_id>,
    co::capabilities<co::Idempotent, co::OffsetGuarded, co::PartitionScoped, co::Replicated>>;
using al_pipeline = co::pipeline<al_source, table_t, al_policy, co::with_store<kf::offset_store>>;
}  // namespace

TEST_CASE("Kafka's committed offsets go with a deleted topic: its successor is read from 0") {
  // AtLeastOnce with the positions in Kafka (kafka::offset_store) has no fingerprint to
  // compare: what protects it from a recreated topic is that the group coordinator deletes a
  // deleted topic's committed offsets. Checked here, because docs/adapters.md relies on it.
  broker b;
  const std::string topic = unique("recreated-offsets");
  const std::string group = unique("readers");
  const auto run_to = [&](table_t& table, std::int64_t each) {
    al_source src(b.consumer(topic, group));
    kf::offset_store store(src);
    al_pipeline p(src, table, store, co::settings{.batch_size = 16});
    std::size_t n = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!(store.load(p0) == co::position{each} && store.load(p1) == co::position{each})) {
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                      "the committed offsets did not reach " << each);
      n += p.poll_once();
    }
    src.close();
    return n;
  };
  b.create_topic(topic, 2);
  (void)produce(b, topic, 20, 0);
  table_t old_rows;
  CHECK(run_to(old_rows, 20) == 40);

  b.delete_topic(topic);
  b.create_topic(topic, 2);
  (void)produce(b, topic, 30, 100000);
  table_t new_rows;
  // Every record of the new topic, from offset 0: none of its first 20 per partition skipped.
  CHECK(run_to(new_rows, 30) == 60);
  std::size_t rows = 0;
  new_rows.for_each([&](const co::memory::stored_row<order_event>& r) {
    ++rows;
    CHECK(r.row.order_id >= 100000);  // the new topic's
  });
  CHECK(rows == 60);
}

TEST_CASE(
    "the broker killed with SIGKILL and restarted mid-run: nothing acknowledged is lost, and "
    "the consumer resumes by itself") {
  test_support::scratch_dir dir;
  own_broker crashing(dir.path());
  broker b(crashing.info());
  const std::string topic = unique("broker-crash");
  const std::string group = unique("ledger");
  b.create_topic(topic, 2);
  (void)produce(b, topic, 200, 0);  // acknowledged by the broker (acks=all) before it dies
  sink_t sink(dir / "orders.sqlite");
  group_t src(b.consumer(topic, group));
  pipeline_t p(src, sink, co::settings{.batch_size = 16});
  (void)pump_until(p, "both partitions past 30",
                   [&] { return stored(sink, p0) >= 30 && stored(sink, p1) >= 30; });

  crashing.crash();
  // The consumer polls on through the outage: nothing leaves poll_once, no record is skipped.
  const auto outage = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < outage)
    REQUIRE_NOTHROW((void)p.poll_once());
  crashing.restart();
  (void)produce(b, topic, 50, 100000);
  (void)pump_until(p, "both partitions at 250 after the restart",
                   [&] { return stored(sink, p0) == 250 && stored(sink, p1) == 250; });

  // Every record acknowledged before and after the crash is in the ledger once, at its offset.
  const auto rows = rows_of(sink);
  CHECK(rows.size() == 500);
  for (const auto& [id, r] : rows) {
    const std::int64_t base = id >= 100000 ? 100000 : 0;
    CHECK(r.partition == (id - base) % 2);
    CHECK(r.offset == (id - base) / 2 + (base != 0 ? 200 : 0));
  }
  src.close();
}

// ---- what a Kafka user expects: JSON, poison messages, dead letters in PostgreSQL -------------

namespace {

struct payment final {
  std::int64_t id = 0;
  std::int64_t cents = 0;
};
using payment_json =
    cj::codec<payment,
              cj::fields<cj::field<"id", &payment::id>, cj::field<"cents", &payment::cents>>>;
struct payments_table final
    : pg::table_layout<"payments", payment, pg::key_columns<pg::column<"id", &payment::id>>,
                       pg::value_columns<pg::column<"cents", &payment::cents>>> {};

/// The first column of the first row `sql` returns on `conninfo`, as an integer.
std::int64_t pg_integer(const std::string& conninfo, const std::string& sql) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> c(PQconnectdb(conninfo.c_str()), &PQfinish);
  REQUIRE(PQstatus(c.get()) == CONNECTION_OK);
  std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(c.get(), sql.c_str()), &PQclear);
  REQUIRE_MESSAGE(PQresultStatus(r.get()) == PGRES_TUPLES_OK, PQerrorMessage(c.get()));
  REQUIRE(PQntuples(r.get()) == 1);
  return std::stoll(PQgetvalue(r.get(), 0, 0));
}

}  // namespace

TEST_CASE("JSON into PostgreSQL: poison messages go to a dead-letter table, the rest is applied") {
  broker b;
  const std::string topic = unique("payments");
  b.create_topic(topic, 2);
  // 60 payments over two partitions; five poison messages a JSON library would have read as
  // something (12.5 cents truncated, a missing field defaulted, a key twice) or could not (cut
  // text, a tombstone).
  const std::map<std::int64_t, std::string> poison{{7, R"({"id":7,"cents":12.5})"},
                                                   {19, R"({"id":19})"},
                                                   {31, R"({"id":31,"cents":1,"cents":2})"},
                                                   {44, R"({"id":44,"ce)"},
                                                   {52, ""}};  // "" stands for the tombstone
  {
    kf::producer<payment, payment_json> prod(b.producer_config(), topic);
    for (std::int64_t id = 1; id <= 60; ++id) {
      const co::partition_id k{static_cast<std::int32_t>(id % 2)};
      if (const auto it = poison.find(id); it != poison.end()) {
        kf::message_copy m;
        const std::string key = std::to_string(id);
        m.key = std::vector<std::byte>(reinterpret_cast<const std::byte*>(key.data()),
                                       reinterpret_cast<const std::byte*>(key.data()) + key.size());
        if (!it->second.empty())
          m.value = std::vector<std::byte>(
              reinterpret_cast<const std::byte*>(it->second.data()),
              reinterpret_cast<const std::byte*>(it->second.data()) + it->second.size());
        prod.send(k, m);
      } else {
        prod.send(k, payment{id, id * 100});
      }
    }
    prod.flush();
  }

  crash_lab::pg_server server(crash_lab::pg_server_options{.fsync = true});
  using policy = co::TransactionalPosition<>;
  using source_t =
      kf::group_source<kf::decoded<payment>, policy, kf::tolerant<payment, payment_json>>;
  using sink = pg::guarded_upsert_sink<payments_table, pg::synced>;
  using letters_t = pg::dead_letters<kf::decoded<payment>, kf::letter_bytes<payment_json>>;
  using pipeline =
      co::pipeline<source_t, sink, policy, co::with_transform<kf::decoded_value>,
                   co::with_error_handling<co::dead_letter<>>, co::with_dead_letters<letters_t>>;
  const auto options = b.consumer(topic, unique("payments"));
  const auto run_until_end = [&](std::size_t expect_polled) {
    source_t src(options);
    pg::sink_options so;
    so.stream = "payments-consumer";
    sink s(server.conninfo(), so);
    pg::dead_letter_options lo;
    lo.stream = "payments-consumer";
    letters_t letters(server.conninfo(), lo);
    pipeline p(src, s, letters, co::settings{.batch_size = 16});
    std::size_t polled = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (s.load_position(p0) != co::position{30} || s.load_position(p1) != co::position{30}) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      polled += p.poll_once();
    }
    CHECK(polled == expect_polled);
    src.close();
    return letters.letters();
  };
  CHECK(run_until_end(60) == 5);

  const std::string c = server.conninfo();
  CHECK(pg_integer(c, "SELECT count(*) FROM payments") == 55);
  CHECK(pg_integer(c, "SELECT count(*) FROM payments WHERE cents <> id * 100") == 0);
  CHECK(pg_integer(c, "SELECT count(*) FROM commit_order_dead_letters") == 5);
  // Each letter keeps the message's own bytes, at its coordinates, and why.
  for (const auto& entry : poison) {
    const std::int64_t id = entry.first;  // (clang 14 cannot capture a structured binding)
    const std::string& text = entry.second;
    INFO("payment ", id);
    const std::string where =
        "SELECT count(*) FROM commit_order_dead_letters WHERE key = convert_to('" +
        std::to_string(id) + "', 'UTF8') AND source_partition = " + std::to_string(id % 2) +
        " AND reason LIKE '%cannot be decoded%' AND ";
    CHECK(pg_integer(c, where + (text.empty() ? "value IS NULL"
                                              : "value = convert_to('" + text + "', 'UTF8')")) ==
          1);
  }
  CHECK(pg_integer(c,
                   "SELECT count(*) FROM commit_order_dead_letters WHERE reason LIKE "
                   "'%\"cents\" is 12.5, not an integer%'") == 1);
  CHECK(pg_integer(c,
                   "SELECT count(*) FROM commit_order_dead_letters WHERE reason LIKE "
                   "'%appears twice%'") == 1);

  // A second run of the group resumes at the positions: nothing read again, no letter added.
  CHECK(run_until_end(0) == 0);
  CHECK(pg_integer(c, "SELECT count(*) FROM commit_order_dead_letters") == 5);
}

TEST_CASE("transactional input with Kafka's offsets as the store: the group's lag ends at 0") {
  // What lag tools compute: the partition's high watermark minus the group's committed offset.
  // Under read_committed the last offsets are a commit marker and an aborted transaction's
  // records with its marker, which no consumer receives; the committed offset must pass them,
  // or every dashboard shows a lag that never drains.
  broker b;
  const std::string topic = unique("txn-lag");
  const std::string group = unique("lagging");
  b.create_topic(topic, 2);
  raw_producer prod(b, topic, unique("txn-producer"));
  // Per partition: committed at 0..4 (marker 5), aborted at 6..8 (marker 9): end 10.
  (void)transaction(prod, 5, 1000, true);
  (void)transaction(prod, 3, 2000, false);
  for (const co::partition_id k : {p0, p1})
    b.wait_end(topic, k, 10);

  table_t table;
  al_source src(b.consumer(topic, group));
  kf::offset_store store(src);
  al_pipeline p(src, table, store, co::settings{.batch_size = 16});
  const std::size_t applied = pump_until(p, "the group's committed offsets at the end", [&] {
    return store.load(p0) == co::position{10} && store.load(p1) == co::position{10};
  });
  CHECK(applied == 10);  // the five committed records of each partition, none aborted
  for (const co::partition_id k : {p0, p1}) {
    INFO("partition " << k.value());
    const std::int64_t high = b.watermarks(topic, k).second;
    CHECK(high == 10);
    CHECK(high - store.load(k)->value() == 0);  // the lag a dashboard shows
    CHECK(p.progress(k).unread() == 0);
    CHECK(p.progress(k).uncommitted() == 0);
  }
  src.close();

  // A restart of the group from those offsets reads nothing again.
  table_t again;
  al_source next(b.consumer(topic, group));
  kf::offset_store next_store(next);
  al_pipeline q(next, again, next_store, co::settings{.batch_size = 16});
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  std::size_t reread = 0;
  while (std::chrono::steady_clock::now() < deadline)
    reread += q.poll_once();
  CHECK(reread == 0);
  CHECK(again.size() == 0);
  next.close();
}

namespace {

/// What a reader of `topic` partition 0 sees from its start, at `isolation`: the values'
/// order ids, in offset order.
std::vector<std::int64_t> read_all(const broker& b, const std::string& topic,
                                   const char* isolation) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  kf::properties p = b.client_config();
  p.emplace("group.id", unique("reader"));
  p.emplace("isolation.level", isolation);
  p.emplace("enable.partition.eof", "true");
  p.emplace("enable.auto.commit", "false");
  for (const auto& [key, value] : p)
    REQUIRE(rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) ==
            RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE_MESSAGE(rk != nullptr, err);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
  REQUIRE(rd_kafka_assign(rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(list);
  std::vector<std::int64_t> seen;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool at_end = false;
  while (!at_end && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr)
      continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      at_end = true;
    } else {
      REQUIRE_MESSAGE(m->err == RD_KAFKA_RESP_ERR_NO_ERROR, rd_kafka_err2name(m->err));
      const auto* bytes = static_cast<const std::byte*>(m->payload);
      seen.push_back(kf::trivial_codec<order_event>::decode({bytes, m->len}).order_id);
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  REQUIRE_MESSAGE(at_end, "the end of " << topic << " was not reached within 30 s");
  return seen;
}

/// What a pipeline would tell a group member about its partitions, for a member the test polls
/// by hand: every partition it is given starts at the beginning.
struct from_the_start final : co::assignment_listener {
  std::vector<co::start_at> assigned(std::span<const co::partition_id> partitions,
                                     std::int32_t) override {
    std::vector<co::start_at> starts;
    for (const co::partition_id k : partitions)
      starts.push_back(co::start_at{k, co::position{0}});
    return starts;
  }
  void revoked(std::span<const co::partition_id>) override {}
  void lost(std::span<const co::partition_id>) override {}
};

/// Orders 0..9 into partition 0 of `topic`.
void ten_orders(const broker& b, const std::string& topic) {
  raw_producer in(b, topic);
  for (std::int64_t i = 0; i < 10; ++i)
    in.send(p0, order_event{.order_id = i});
  in.flush();
}

/// Polls a group member the test drives by hand (no pipeline) until it has read `n` records.
void read_by_hand(kf::group_source<order_event, co::TransactionalPosition<>>& member,
                  co::assignment_listener& starts, std::size_t n) {
  member.listen(starts);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::size_t read = 0;
  while (read < n && std::chrono::steady_clock::now() < deadline)
    read += member.poll(n).size();
  REQUIRE(read == n);
}

/// A transactional producer that commits a consumer's offsets inside its transactions (KIP-447,
/// as a read-process-write loop does it by hand): every call waits for the broker's answer and
/// returns librdkafka's error (none: nullptr), which the caller owns.
class offsets_producer final {
 public:
  offsets_producer(const broker& b, std::string topic, const std::string& transactional_id)
      : topic_(std::move(topic)) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    kf::properties p = b.producer_config();
    p.emplace("transactional.id", transactional_id);
    p.emplace("transaction.timeout.ms", "30000");
    for (const auto& [key, value] : p)
      REQUIRE(rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) ==
              RD_KAFKA_CONF_OK);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    REQUIRE_MESSAGE(rk_ != nullptr, err);
    REQUIRE(ok(rd_kafka_init_transactions(rk_, 30000)));
  }
  offsets_producer(const offsets_producer&) = delete;
  offsets_producer& operator=(const offsets_producer&) = delete;
  ~offsets_producer() { rd_kafka_destroy(rk_); }

  /// One unit: begin, produce `ids`, send `offset` of the input's partition 0 with the
  /// consumer's group metadata, then commit (or abort). The first error, or nullptr.
  kf::detail::error_ptr unit(rd_kafka_t* consumer, const std::string& input,
                             const std::vector<std::int64_t>& ids, std::int64_t offset,
                             bool commit) {
    if (kf::detail::error_ptr e = open(consumer, input, ids, offset))
      return e;
    return end(commit);
  }

  /// The unit up to its end: begin, produce, send the offsets. The transaction stays open.
  kf::detail::error_ptr open(rd_kafka_t* consumer, const std::string& input,
                             const std::vector<std::int64_t>& ids, std::int64_t offset) {
    if (kf::detail::error_ptr e{rd_kafka_begin_transaction(rk_)})
      return e;
    for (const std::int64_t id : ids) {
      std::vector<std::byte> value;
      kf::trivial_codec<order_event>::encode(order_event{.order_id = id}, value);
      rd_kafka_vu_t vu[4] = {};
      vu[0].vtype = RD_KAFKA_VTYPE_TOPIC;
      vu[0].u.cstr = topic_.c_str();
      vu[1].vtype = RD_KAFKA_VTYPE_PARTITION;
      vu[1].u.i32 = 0;
      vu[2].vtype = RD_KAFKA_VTYPE_VALUE;
      vu[2].u.mem.ptr = value.data();
      vu[2].u.mem.size = value.size();
      vu[3].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
      vu[3].u.i = RD_KAFKA_MSG_F_COPY;
      if (kf::detail::error_ptr e{rd_kafka_produceva(rk_, vu, 4)})
        return e;
    }
    kf::detail::list_ptr offsets = kf::detail::make_list(1);
    rd_kafka_topic_partition_list_add(offsets.get(), input.c_str(), 0)->offset = offset;
    rd_kafka_consumer_group_metadata_t* group = rd_kafka_consumer_group_metadata(consumer);
    kf::detail::error_ptr sent{
        rd_kafka_send_offsets_to_transaction(rk_, offsets.get(), group, 30000)};
    rd_kafka_consumer_group_metadata_destroy(group);
    return sent;
  }

  /// Ends the open transaction: commits it, or aborts it.
  kf::detail::error_ptr end(bool commit) {
    if (commit)
      return kf::detail::error_ptr{rd_kafka_commit_transaction(rk_, 30000)};
    // Delivered first, so the aborted attempt is in the log (an abort purges what is unsent).
    rd_kafka_flush(rk_, 30000);
    return kf::detail::error_ptr{rd_kafka_abort_transaction(rk_, 30000)};
  }

 private:
  static bool ok(rd_kafka_error_t* e) {
    if (e == nullptr)
      return true;
    MESSAGE(rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return false;
  }

  std::string topic_;
  rd_kafka_t* rk_ = nullptr;
};

}  // namespace

TEST_CASE("by hand, KIP-447: the group's offsets commit with the output, and a zombie is fenced") {
  // What kafka::transactional_sink (issue 24) will rest on, measured on the real broker with
  // librdkafka's own calls: the consuming group's offsets sent inside the producer's transaction
  // move with its output (both, or on abort neither); a read_uncommitted reader is shown the
  // aborted attempt, a read_committed one never; and a second producer under the same
  // transactional.id fences the first, whose next transaction fails fatally as _FENCED.
  broker b;
  const std::string input = unique("rpw-in");
  const std::string output = unique("rpw-out");
  const std::string group = unique("rpw-group");
  const std::string id = unique("rpw-txn");
  b.create_topic(input, 1);
  b.create_topic(output, 1);
  ten_orders(b, input);
  // The consuming member: a group's metadata (its generation) is what the broker checks.
  kf::group_source<order_event, co::TransactionalPosition<>> member(b.consumer(input, group));
  from_the_start starts;
  read_by_hand(member, starts, 10);
  rd_kafka_t* consumer = member.client().handle();
  kf::offset_store committed(member);

  offsets_producer producer(b, output, id);
  REQUIRE_FALSE(producer.unit(consumer, input, {0, 1, 2, 3, 4}, 5, true));
  CHECK(committed.load(p0) == co::position{5});
  CHECK(read_all(b, output, "read_committed") == std::vector<std::int64_t>{0, 1, 2, 3, 4});

  // Aborted: neither the output nor the offsets move.
  REQUIRE_FALSE(producer.unit(consumer, input, {5, 6, 7, 8, 9}, 10, false));
  CHECK(committed.load(p0) == co::position{5});
  CHECK(read_all(b, output, "read_committed") == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  // Not a failure: a reader that does not wait for commit markers sees the attempt too.
  CHECK(read_all(b, output, "read_uncommitted") ==
        std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  // A restarted owner under the same transactional.id: its init fences the old producer.
  offsets_producer successor(b, output, id);
  const kf::detail::error_ptr zombie = producer.unit(consumer, input, {5, 6, 7, 8, 9}, 10, true);
  REQUIRE(zombie);
  const rd_kafka_resp_err_t fenced = rd_kafka_error_code(zombie.get());
  MESSAGE("the zombie's transaction: " << std::string(rd_kafka_err2name(fenced))
                                       << (rd_kafka_error_is_fatal(zombie.get()) ? ", fatal" : ""));
  CHECK(rd_kafka_error_is_fatal(zombie.get()));
  CHECK((fenced == RD_KAFKA_RESP_ERR__FENCED || fenced == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         fenced == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH));
  REQUIRE_FALSE(successor.unit(consumer, input, {5, 6, 7, 8, 9}, 10, true));
  CHECK(committed.load(p0) == co::position{10});
  CHECK(read_all(b, output, "read_committed") ==
        std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  member.close();
}

namespace {

using out_layout = kf::keyed_layout<&order_event::order_id>;
using topic_sink_t = kf::transactional_sink<order_event, out_layout, group_t>;
using rpw_t = co::pipeline<group_t, topic_sink_t, policy_t>;

kf::producer_options transactional(const broker& b, const std::string& id) {
  return kf::producer_options{.config = b.client_config(),
                              .transactional_id = id,
                              .transaction_timeout = 30s,
                              .request_timeout = 30s};
}

/// The order ids of `sent`, ascending: what the output must hold, each once.
std::vector<std::int64_t> ids_of(const std::map<co::partition_id, std::vector<order_event>>& sent) {
  std::vector<std::int64_t> ids;
  for (const auto& [k, events] : sent)
    for (const order_event& e : events)
      ids.push_back(e.order_id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::int64_t> sorted(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

/// Each input partition's records keep their order in the output: the ids `produce` gives
/// partition k are seed + 2 i + k, ascending in offset order.
bool in_input_order(const std::vector<std::int64_t>& output) {
  std::map<std::int64_t, std::int64_t> last;  // by id parity: the input partition
  for (const std::int64_t id : output) {
    const auto [it, first] = last.try_emplace(id % 2, id);
    if (!first && it->second >= id)
      return false;
    it->second = id;
  }
  return true;
}

/// Polls `p` until the group's committed offsets of both partitions are `each`.
std::size_t pump_offsets(rpw_t& p, group_t& source, std::int64_t each) {
  kf::offset_store committed(source);
  return pump_until(p, "both committed offsets at " + std::to_string(each), [&] {
    return committed.load(p0) == co::position{each} && committed.load(p1) == co::position{each};
  });
}

/// A layout that refuses one order's value while `refused` names it: a unit failing half way.
struct refusing_layout final {
  std::string to;
  const std::int64_t* refused = nullptr;
  [[nodiscard]] std::string_view topic(const order_event&) const { return to; }
  void key(const order_event& e, std::vector<std::byte>& out) const {
    kf::big_endian_codec<std::int64_t>::encode(e.order_id, out);
  }
  void value(const order_event& e, std::vector<std::byte>& out) const {
    if (e.order_id == *refused)
      throw std::runtime_error("the layout refuses order " + std::to_string(e.order_id));
    kf::trivial_codec<order_event>::encode(e, out);
  }
};

}  // namespace

TEST_CASE("kafka::transactional_sink: each input once in the output, the group's offsets with it") {
  broker b;
  const std::string input = unique("tsink-in");
  const std::string output = unique("tsink-out");
  const std::string group = unique("tsink-group");
  const std::string id = unique("tsink-txn");
  b.create_topic(input, 2);
  b.create_topic(output, 1);
  auto sent = produce(b, input, 60, 0);
  {
    group_t source(b.consumer(input, group));
    topic_sink_t sink(source, out_layout(output), transactional(b, id));
    rpw_t p(source, sink, co::settings{.batch_size = 16});
    CHECK(pump_offsets(p, source, 60) == 120);
    CHECK(sink.produced() == 120);
    source.close();
  }
  std::vector<std::int64_t> seen = read_all(b, output, "read_committed");
  CHECK(sorted(seen) == ids_of(sent));
  CHECK(in_input_order(seen));

  // The same owner restarted: it resumes at the group's offsets, and writes only what is new.
  for (const auto& [k, events] : produce(b, input, 20, 1000))
    sent[k].insert(sent[k].end(), events.begin(), events.end());
  {
    group_t source(b.consumer(input, group));
    topic_sink_t sink(source, out_layout(output), transactional(b, id));
    rpw_t p(source, sink, co::settings{.batch_size = 16});
    CHECK(pump_offsets(p, source, 80) == 40);
    source.close();
  }
  seen = read_all(b, output, "read_committed");
  CHECK(sorted(seen) == ids_of(sent));
  CHECK(in_input_order(seen));
}

TEST_CASE("kafka::transactional_sink: a unit that fails is aborted, and written once when redone") {
  broker b;
  const std::string input = unique("tsink-fail-in");
  const std::string output = unique("tsink-fail-out");
  const std::string group = unique("tsink-fail-group");
  b.create_topic(input, 2);
  b.create_topic(output, 1);
  const auto sent = produce(b, input, 40, 0);
  std::int64_t refused = 41;  // partition 1's 21st record, inside a unit of 16
  using failing_sink_t = kf::transactional_sink<order_event, refusing_layout, group_t>;
  group_t source(b.consumer(input, group));
  failing_sink_t sink(source, refusing_layout{output, &refused},
                      transactional(b, unique("tsink-fail-txn")));
  co::pipeline<group_t, failing_sink_t, policy_t> p(source, sink, co::settings{.batch_size = 16});
  std::size_t applied = 0;
  const auto failure = until_thrown<std::runtime_error>(p, applied);
  REQUIRE(failure);
  CHECK(std::string(failure->what()).find("refuses order 41") != std::string::npos);
  const std::size_t attempted = sink.produced();
  // The fault is fixed; the same pipeline polls on, reads the unit again from the committed
  // offsets, and writes it again, in a transaction that commits.
  refused = -1;
  kf::offset_store committed(source);
  pump_until(p, "both committed offsets at 40", [&] {
    return committed.load(p0) == co::position{40} && committed.load(p1) == co::position{40};
  });
  CHECK(sink.produced() > 80);  // the aborted attempt's records were produced, then aborted
  MESSAGE("produced " << sink.produced() << " messages for 80 records (" << attempted
                      << " before the failure)");
  const std::vector<std::int64_t> seen = read_all(b, output, "read_committed");
  CHECK(sorted(seen) == ids_of(sent));
  CHECK(in_input_order(seen));
  source.close();
}

TEST_CASE("kafka::transactional_sink: units aborted just after a commit leave the sink working") {
  // A unit rolled back right after the one before it committed: the coordinator may still be
  // writing that commit's markers, so librdkafka's AddPartitionsToTxn is retried and its
  // EndTxn(abort) can reach a transaction the coordinator already finished, which it answers
  // INVALID_TXN_STATE, fatal to the producer. Nothing of the unit reached the log, and the
  // sink must go on through a new producer under its transactional.id: a failed unit ending
  // the consumer for good is the unit's records never written.
  broker b;
  const std::string output = unique("tsink-abort-out");
  b.create_topic(output, 1);
  group_t source(b.consumer(unique("tsink-abort-in"), unique("tsink-abort-group")));
  topic_sink_t sink(source, out_layout(output), transactional(b, unique("tsink-abort-txn")));
  std::vector<std::int64_t> committed;
  constexpr std::int64_t units = 60;
  for (std::int64_t i = 0; i < units; ++i) {
    sink.begin();
    sink.apply(p0, co::offset{2 * i}, order_event{.order_id = i});
    sink.commit();
    committed.push_back(i);
    sink.begin();
    sink.apply(p0, co::offset{2 * i + 1}, order_event{.order_id = -1 - i});
    sink.rollback();
  }
  MESSAGE(sink.failed_aborts() << " of " << units << " aborts the coordinator refused, "
                               << sink.replaced_producers() << " producers replaced");
  CHECK(sink.replaced_producers() <= sink.failed_aborts());
  CHECK(read_all(b, output, "read_committed") == committed);
  source.close();
}

namespace {

/// A layout that refuses every order whose id is 3 modulo 7: records given up on for good.
struct poisoned_layout final {
  std::string to;
  static bool poisoned(std::int64_t id) { return id % 7 == 3; }
  [[nodiscard]] std::string_view topic(const order_event&) const { return to; }
  void key(const order_event& e, std::vector<std::byte>& out) const {
    kf::big_endian_codec<std::int64_t>::encode(e.order_id, out);
  }
  void value(const order_event& e, std::vector<std::byte>& out) const {
    if (poisoned(e.order_id))
      throw std::runtime_error("the layout refuses order " + std::to_string(e.order_id));
    kf::trivial_codec<order_event>::encode(e, out);
  }
};

/// A letter keeps the order's bytes, as the output would have.
struct order_letter final {
  static std::optional<std::vector<std::byte>> key(const order_event& e) {
    std::vector<std::byte> out;
    kf::big_endian_codec<std::int64_t>::encode(e.order_id, out);
    return out;
  }
  static std::optional<std::vector<std::byte>> value(const order_event& e) {
    std::vector<std::byte> out;
    kf::trivial_codec<order_event>::encode(e, out);
    return out;
  }
};

}  // namespace

TEST_CASE("kafka::transactional_sink: dead letters commit with the offsets that pass them") {
  // Every seventh order is refused by the layout and given up on (dead_letter<0>): its letter
  // goes to a topic of its own inside the transaction that commits the group's offsets past
  // it. A read_committed reader of the letters sees each refused order once, across a restart
  // of the owner, and the output holds every other order once.
  broker b;
  const std::string input = unique("tsink-dlt-in");
  const std::string output = unique("tsink-dlt-out");
  const std::string dead = unique("tsink-dlt-dead");
  const std::string group = unique("tsink-dlt-group");
  const std::string id = unique("tsink-dlt-txn");
  b.create_topic(input, 2);
  b.create_topic(output, 1);
  b.create_topic(dead, 1);
  using sink_t = kf::transactional_sink<order_event, poisoned_layout, group_t>;
  using letters_t = sink_t::dead_letters<order_event, order_letter>;
  using dlt_pipeline_t =
      co::pipeline<group_t, sink_t, policy_t, co::with_error_handling<co::dead_letter<>>,
                   co::with_dead_letters<letters_t>>;
  std::vector<std::int64_t> sent = ids_of(produce(b, input, 20, 0));
  std::size_t committed_letters = 0;
  const auto run_to = [&](std::int64_t each) {
    group_t source(b.consumer(input, group));
    sink_t sink(source, poisoned_layout{output}, transactional(b, id));
    letters_t letters(sink, dead);
    dlt_pipeline_t p(source, sink, letters, co::settings{.batch_size = 16});
    kf::offset_store committed(source);
    pump_until(p, "both committed offsets at " + std::to_string(each), [&] {
      return committed.load(p0) == co::position{each} && committed.load(p1) == co::position{each};
    });
    CHECK(sink.letters_waiting() == 0);
    committed_letters += sink.letters_committed();
    source.close();
  };
  run_to(20);
  const std::vector<std::int64_t> more = ids_of(produce(b, input, 20, 1000));
  sent.insert(sent.end(), more.begin(), more.end());
  run_to(40);  // the owner restarted under its transactional.id and group
  std::vector<std::int64_t> kept, refused;
  for (const std::int64_t order : sent)
    (poisoned_layout::poisoned(order) ? refused : kept).push_back(order);
  REQUIRE_FALSE(refused.empty());
  CHECK(committed_letters == refused.size());
  CHECK(sorted(read_all(b, output, "read_committed")) == sorted(kept));
  const std::vector<std::int64_t> letters = read_all(b, dead, "read_committed");
  MESSAGE(letters.size() << " letters for " << refused.size() << " refused of " << sent.size());
  CHECK(sorted(letters) == sorted(refused));
  CHECK(in_input_order(letters));
}

TEST_CASE("kafka::transactional_sink: an owner restarted under the same id fences its zombie") {
  broker b;
  const std::string input = unique("tsink-zombie-in");
  const std::string output = unique("tsink-zombie-out");
  const std::string group = unique("tsink-zombie-group");
  const std::string id = unique("tsink-zombie-txn");
  b.create_topic(input, 2);
  b.create_topic(output, 1);
  auto sent = produce(b, input, 30, 0);
  {
    group_t source(b.consumer(input, group));
    topic_sink_t zombie(source, out_layout(output), transactional(b, id));
    rpw_t p(source, zombie, co::settings{.batch_size = 16});
    CHECK(pump_offsets(p, source, 30) == 60);
    const auto more = produce(b, input, 10, 1000);
    // The owner's successor starts under the same transactional.id: its init fences the
    // producer of the one still running.
    topic_sink_t successor(source, out_layout(output), transactional(b, id));
    std::size_t applied = 0;
    const auto f = until_thrown<co::fenced>(p, applied);
    REQUIRE(f);
    MESSAGE(std::string(f->what()));
    CHECK(std::string(f->what()).find("a newer producer under transactional.id '" + id + "'") !=
          std::string::npos);
    // Fenced stays fenced: nothing more is written through it.
    CHECK_THROWS_AS(p.poll_once(), co::fenced);
    for (const auto& [k, events] : more)
      sent[k].insert(sent[k].end(), events.begin(), events.end());
    source.close();
  }
  // Nothing of the zombie's last unit is visible, and the successor writes it once.
  {
    group_t source(b.consumer(input, group));
    topic_sink_t sink(source, out_layout(output), transactional(b, id));
    rpw_t p(source, sink, co::settings{.batch_size = 16});
    pump_offsets(p, source, 40);
    source.close();
  }
  const std::vector<std::int64_t> seen = read_all(b, output, "read_committed");
  CHECK(sorted(seen) == ids_of(sent));
  CHECK(in_input_order(seen));
}

TEST_CASE("a claim waits for a transaction still committing offsets, never reads around it") {
  // A restarted owner's claim while its predecessor's transaction, offsets sent, has not ended
  // yet: the group's offset read then must be the one that transaction leaves, never the one
  // before it, or the unit would be written twice. librdkafka asks read_committed (the source's
  // own setting) with require_stable, and the broker answers UNSTABLE_OFFSET_COMMIT until the
  // transaction ends; the adapter retries that.
  broker b;
  const std::string input = unique("stable-in");
  const std::string output = unique("stable-out");
  const std::string group = unique("stable-group");
  b.create_topic(input, 1);
  b.create_topic(output, 1);
  ten_orders(b, input);
  kf::group_source<order_event, co::TransactionalPosition<>> member(b.consumer(input, group));
  from_the_start starts;
  read_by_hand(member, starts, 10);
  offsets_producer producer(b, output, unique("stable-txn"));
  REQUIRE_FALSE(producer.unit(member.client().handle(), input, {0, 1, 2, 3, 4}, 5, true));
  REQUIRE_FALSE(producer.open(member.client().handle(), input, {5, 6, 7, 8, 9}, 10));
  std::thread ends([&] {
    std::this_thread::sleep_for(2s);
    CHECK_FALSE(producer.end(true));
  });
  const auto asked = std::chrono::steady_clock::now();
  const std::optional<co::position> stored = member.client().committed(p0);
  const auto waited = std::chrono::steady_clock::now() - asked;
  ends.join();
  CHECK(stored == co::position{10});
  MESSAGE("the offset read waited "
          << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
          << " ms for the transaction to end");
  member.close();
}

namespace {

/// A layout that stalls the unit once, inside its first value, while `stall` is set: a
/// consumer frozen in a pause longer than max.poll.interval.ms.
struct stalling_layout final {
  std::string to;
  std::atomic<int>* stall_ms = nullptr;
  std::atomic<bool>* stalled = nullptr;
  [[nodiscard]] std::string_view topic(const order_event&) const { return to; }
  void key(const order_event& e, std::vector<std::byte>& out) const {
    kf::big_endian_codec<std::int64_t>::encode(e.order_id, out);
  }
  void value(const order_event& e, std::vector<std::byte>& out) const {
    if (const int ms = stall_ms->exchange(0); ms > 0) {
      stalled->store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    kf::trivial_codec<order_event>::encode(e, out);
  }
};

}  // namespace

TEST_CASE("kafka::transactional_sink: a member the group replaced is refused, rejoins, goes on") {
  // Member A stalls inside a unit past max.poll.interval.ms; the group gives its partitions to
  // B, which writes them. A's late commit is refused by the coordinator (fenced, the unit
  // aborted), but its producer is sound: once B leaves, A, still polling, rejoins, claims from
  // the group's offsets and writes what is new. Nothing twice, nothing stranded.
  broker b;
  const std::string input = unique("tsink-replaced-in");
  const std::string output = unique("tsink-replaced-out");
  const std::string group = unique("tsink-replaced-group");
  b.create_topic(input, 2);
  b.create_topic(output, 1);
  auto sent = produce(b, input, 10, 0);
  using stalling_sink_t = kf::transactional_sink<order_event, stalling_layout, group_t>;
  using stalling_pipeline_t = co::pipeline<group_t, stalling_sink_t, policy_t>;
  std::atomic<int> a_stall{6000};
  std::atomic<bool> a_stalled{false};
  std::atomic<int> b_stall{0};
  std::atomic<bool> b_stalled{false};
  kf::consumer_options a_options = b.consumer(input, group);
  a_options.config["max.poll.interval.ms"] = "3000";
  a_options.config["session.timeout.ms"] = "3000";
  group_t a(a_options);
  stalling_sink_t a_sink(a, stalling_layout{output, &a_stall, &a_stalled},
                         transactional(b, unique("tsink-replaced-a")));
  stalling_pipeline_t pa(a, a_sink, co::settings{.batch_size = 100});
  std::optional<co::fenced> refused;
  std::thread first([&] {
    std::size_t applied = 0;
    refused = until_thrown<co::fenced>(pa, applied);
  });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!a_stalled && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  REQUIRE(a_stalled);
  {
    group_t other(b.consumer(input, group));
    stalling_sink_t b_sink(other, stalling_layout{output, &b_stall, &b_stalled},
                           transactional(b, unique("tsink-replaced-b")));
    stalling_pipeline_t pb(other, b_sink, co::settings{.batch_size = 100});
    pump_until(pb, "B wrote both partitions", [&] {
      kf::offset_store committed(other);
      return committed.load(p0) == co::position{10} && committed.load(p1) == co::position{10};
    });
    first.join();
    REQUIRE(refused);
    MESSAGE(std::string(refused->what()));
    CHECK(std::string(refused->what()).find("group coordinator refused") != std::string::npos);
    other.close();
  }
  for (const auto& [k, events] : produce(b, input, 5, 1000))
    sent[k].insert(sent[k].end(), events.begin(), events.end());
  // A polls on: it rejoins, claims both partitions from the group's offsets, writes the rest.
  kf::offset_store committed(a);
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!(committed.load(p0) == co::position{15} && committed.load(p1) == co::position{15})) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < until, "A did not go on within 60 s");
    try {
      pa.poll_once();
    } catch (const co::fenced& e) {
      MESSAGE("A, rejoining: " << std::string(e.what()));
    }
  }
  const std::vector<std::int64_t> seen = read_all(b, output, "read_committed");
  CHECK(sorted(seen) == ids_of(sent));
  CHECK(in_input_order(seen));
  a.close();
}

namespace {

using alo_sink_t = kf::topic_sink<order_event, out_layout>;
using alo_pipeline_t =
    co::pipeline<al_source, alo_sink_t, al_policy, co::with_store<kf::offset_store>>;

}  // namespace

TEST_CASE("kafka::topic_sink: a crash before the position appends one duplicate run, loses none") {
  broker b;
  const std::string input = unique("alo-in");
  const std::string output = unique("alo-out");
  const std::string group = unique("alo-group");
  b.create_topic(input, 2);
  b.create_topic(output, 1);
  const auto sent = produce(b, input, 40, 0);
  const kf::topic_sink_options options{.config = b.client_config()};
  std::size_t first_run = 0;
  {
    al_source source(b.consumer(input, group));
    kf::offset_store store(source);
    alo_sink_t sink(out_layout(output), options);
    co::pipeline<al_source, alo_sink_t, al_policy, co::with_store<kf::offset_store>,
                 co::with_faults<crash_after>>
        p(source, sink, store, co::settings{.batch_size = 16});
    // After the third unit's write, which the brokers acknowledged, before its position.
    p.faults() = crash_after{co::step_kind::write, 2};
    std::size_t applied = 0;
    REQUIRE(until_thrown<co::injected_crash>(p, applied));
    first_run = sink.acknowledged();
    CHECK(sink.failed_deliveries() == 0);
    source.close();
  }
  {
    al_source source(b.consumer(input, group));
    kf::offset_store store(source);
    alo_sink_t sink(out_layout(output), options);
    alo_pipeline_t p(source, sink, store, co::settings{.batch_size = 16});
    pump_until(p, "both committed offsets at 40", [&] {
      return store.load(p0) == co::position{40} && store.load(p1) == co::position{40};
    });
    source.close();
  }
  const std::vector<std::int64_t> seen = read_all(b, output, "read_committed");
  // Every input at least once; the extra messages are the crashed unit's, written again.
  std::map<std::int64_t, int> copies;
  for (const std::int64_t id : seen)
    ++copies[id];
  for (const std::int64_t id : ids_of(sent))
    CHECK(copies[id] >= 1);
  const std::size_t duplicated = seen.size() - 80;
  MESSAGE(first_run << " messages before the crash; " << seen.size() << " in the output for 80 "
                    << "records: " << duplicated << " written twice");
  CHECK(duplicated >= 1);
  CHECK(duplicated <= 16);  // one unit
  std::size_t twice = 0;
  for (const auto& [id, n] : copies) {
    CHECK(n <= 2);
    twice += n == 2 ? 1 : 0;
  }
  CHECK(twice == duplicated);
}
