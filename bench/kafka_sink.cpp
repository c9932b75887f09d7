// SPDX-License-Identifier: BSL-1.0
// Read, process, write: a Kafka topic into another through `pipeline`, against hand-written
// librdkafka loops making the same calls, at batch 1, 64 and 512:
//   * exactly once, kafka::transactional_sink under TransactionalPosition: a group member's
//     polls, and per unit begin_transaction, one produce per record (the same key and value
//     bytes), send_offsets_to_transaction with the member's group metadata, commit_transaction;
//   * at least once, kafka::topic_sink under AtLeastOnce with kafka::offset_store: an
//     idempotent producer, and per unit one produce per record, a flush that waits for every
//     acknowledgement, then a synchronous commit of the member's offsets.
// The cost of exactness is the transactional pipeline's time per record over the at-least-once
// one's, at the same batch.
//
//   kafka_sink_bench [--rounds R]   the interleaved comparison (R rounds, default 9): each round
//                                   runs the pipeline and its twin back to back, alternating
//                                   which goes first; the ratio is the median of the rounds'
//   kafka_sink_bench --verify       each variant writes every input record once, with the same
//                                   key and value bytes, in input order
//
// The consumer joins its group (3 s on the mock) and handles its first unit before the clock
// starts, in both variants; the clock stops when the last record's unit has committed. On
// librdkafka's mock cluster (in this process) by default; with COMMIT_ORDER_KAFKA_BOOTSTRAP set,
// on that broker (a real one: the kafka_broker fixture's), where the coordinator's round trips
// are real. Wall clock only: a unit's cost is the coordinator's round trips, on both sides.
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <commit_order/adapters/kafka.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/kafka.hpp"

namespace {

namespace co = commit_order;
namespace kf = commit_order::kafka;
using clock_type = std::chrono::steady_clock;

struct order final {
  std::int64_t order_id = 0;
  std::int64_t customer_id = 0;
  std::int64_t total_cents = 0;
  std::int64_t event_seq = 0;
};

using policy = co::TransactionalPosition<>;
using source_t = kf::group_source<order, policy>;
using layout_t = kf::keyed_layout<&order::order_id>;
using sink_t = kf::transactional_sink<order, layout_t, source_t>;

using alo_policy = co::AtLeastOnce<>;
using alo_source_t = kf::group_source<order, alo_policy>;
using alo_sink_t = kf::topic_sink<order, layout_t>;

/// Which pair runs: the transactional one, or the at-least-once one.
enum class mode { exactly_once, at_least_once };

/// Where the topics live: the mock cluster, or the broker COMMIT_ORDER_KAFKA_BOOTSTRAP names.
class cluster final {
 public:
  cluster() {
    if (const char* b = std::getenv("COMMIT_ORDER_KAFKA_BOOTSTRAP"); b != nullptr && *b != '\0') {
      bootstrap_ = b;
    } else {
      mock_.emplace();
      bootstrap_ = mock_->bootstraps();
    }
  }
  [[nodiscard]] kf::properties client() const { return {{"bootstrap.servers", bootstrap_}}; }
  /// A topic nobody used before, of one partition, holding `n` orders.
  [[nodiscard]] std::string input(std::int64_t n) {
    std::string name = fresh("bench.rpw.in");
    create(name);
    kf::producer<order> p(client(), name);
    for (std::int64_t i = 0; i < n; ++i)
      p.send(co::partition_id{0}, order{1 + i % 997, 100 + i % 53, 100 + (i * 31) % 50000, i});
    p.flush();
    return name;
  }
  [[nodiscard]] std::string output() {
    std::string name = fresh("bench.rpw.out");
    create(name);
    return name;
  }
  [[nodiscard]] kf::consumer_options member(const std::string& topic) const {
    kf::consumer_options o{.topic = topic, .config = client()};
    o.config["group.id"] = fresh("bench.rpw.group");
    o.config["fetch.wait.max.ms"] = "10";
    if (mock_) {
      o.config["session.timeout.ms"] = "4000";
      o.config["heartbeat.interval.ms"] = "200";
    }
    return o;
  }
  [[nodiscard]] static std::string fresh(const std::string& base) {
    static int n = 0;
    return base + "." + std::to_string(::getpid()) + "." + std::to_string(n++);
  }

 private:
  void create(const std::string& name) {
    if (mock_)
      mock_->create_topic(name, 1);
    else
      crash_lab::detail::create_topic(bootstrap_, name, 1);
  }

  std::optional<kf::mock_cluster> mock_;
  std::string bootstrap_;
};

cluster& shared_cluster() {
  static cluster c;
  return c;
}

/// One run: the seconds from the end of the first unit to the last record's commit.
struct run_result final {
  double seconds = 0;
  std::int64_t timed_records = 0;
  std::string output;
};

/// Polls `p` until `n` records are done: the clock runs from the end of the first unit.
template <class Pipeline>
void timed(Pipeline& p, std::int64_t n, run_result& r) {
  std::int64_t done = 0;
  while (done == 0)
    done += static_cast<std::int64_t>(p.poll_once());
  r.timed_records = n - done;
  const auto start = clock_type::now();
  while (done < n)
    done += static_cast<std::int64_t>(p.poll_once());
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
}

run_result alo_pipeline_run(const std::string& input, std::int64_t n, std::size_t batch) {
  cluster& c = shared_cluster();
  run_result r{.output = c.output()};
  alo_source_t source(c.member(input));
  kf::offset_store store(source);
  alo_sink_t sink(layout_t(r.output), {.config = c.client()});
  co::pipeline<alo_source_t, alo_sink_t, alo_policy, co::with_store<kf::offset_store>> p(
      source, sink, store, co::settings{.batch_size = batch});
  timed(p, n, r);
  source.close();
  return r;
}

run_result pipeline_run(mode m, const std::string& input, std::int64_t n, std::size_t batch) {
  if (m == mode::at_least_once)
    return alo_pipeline_run(input, n, batch);
  cluster& c = shared_cluster();
  run_result r{.output = c.output()};
  source_t source(c.member(input));
  sink_t sink(source, layout_t(r.output),
              {.config = c.client(), .transactional_id = cluster::fresh("bench.rpw.txn")});
  co::pipeline<source_t, sink_t, policy> p(source, sink, co::settings{.batch_size = batch});
  timed(p, n, r);
  source.close();
  return r;
}

/// librdkafka by hand: the error of a call, or a stop.
void check(rd_kafka_error_t* e, const char* what) {
  if (e == nullptr)
    return;
  std::fprintf(stderr, "%s: %s\n", what, rd_kafka_error_string(e));
  std::exit(2);
}

/// The hand-written twins: a group member that, on its assignment, reads the committed offset
/// (exactly once: in an empty transaction, as the pipeline claims) and starts there; then per
/// batch of up to `batch` messages (the first waits 100 ms, the rest are taken as fetched), one
/// transaction (exactly once), or the messages, a flush and a synchronous offsets commit (at
/// least once).
class handwritten final {
 public:
  handwritten(mode which, const std::string& input, const std::string& output, std::size_t batch)
      : mode_(which), input_(input), output_(output), batch_(batch) {
    cluster& c = shared_cluster();
    char err[512];
    rd_kafka_conf_t* cc = rd_kafka_conf_new();
    kf::consumer_options m = c.member(input);
    m.config["enable.auto.commit"] = "false";
    m.config["enable.auto.offset.store"] = "false";
    m.config["auto.offset.reset"] = "error";
    m.config["isolation.level"] = "read_committed";
    m.config["enable.partition.eof"] = "true";
    for (const auto& [k, v] : m.config)
      rd_kafka_conf_set(cc, k.c_str(), v.c_str(), err, sizeof err);
    rd_kafka_conf_set_opaque(cc, this);
    rd_kafka_conf_set_rebalance_cb(cc, &handwritten::rebalance);
    consumer_ = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof err);
    rd_kafka_poll_set_consumer(consumer_);
    rd_kafka_conf_t* pc = rd_kafka_conf_new();
    for (const auto& [k, v] : c.client())
      rd_kafka_conf_set(pc, k.c_str(), v.c_str(), err, sizeof err);
    rd_kafka_conf_set(pc, "partitioner", "murmur2_random", err, sizeof err);
    if (mode_ == mode::exactly_once) {
      rd_kafka_conf_set(pc, "transactional.id", cluster::fresh("bench.rpw.hand").c_str(), err,
                        sizeof err);
      rd_kafka_conf_set(pc, "transaction.timeout.ms", "60000", err, sizeof err);
    } else {
      rd_kafka_conf_set(pc, "enable.idempotence", "true", err, sizeof err);
      rd_kafka_conf_set(pc, "acks", "all", err, sizeof err);
      rd_kafka_conf_set_opaque(pc, this);
      rd_kafka_conf_set_dr_msg_cb(pc, &handwritten::delivered);
    }
    producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof err);
    if (mode_ == mode::exactly_once)
      check(rd_kafka_init_transactions(producer_, 30000), "init_transactions");
    rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, input_.c_str(), RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(consumer_, topics);
    rd_kafka_topic_partition_list_destroy(topics);
  }
  handwritten(const handwritten&) = delete;
  handwritten& operator=(const handwritten&) = delete;
  ~handwritten() {
    rd_kafka_consumer_close(consumer_);
    rd_kafka_destroy(consumer_);
    rd_kafka_destroy(producer_);
  }

  /// Polls one batch and writes it in one transaction; the records it wrote.
  std::int64_t unit() {
    std::vector<rd_kafka_message_t*> got;
    for (int wait = 100; got.size() < batch_; wait = 0) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_, wait);
      if (m == nullptr)
        break;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_message_destroy(m);
        continue;  // a partition's end
      }
      got.push_back(m);
    }
    if (got.empty())
      return 0;
    const bool txn = mode_ == mode::exactly_once;
    if (txn)
      check(rd_kafka_begin_transaction(producer_), "begin_transaction");
    for (rd_kafka_message_t* m : got) {
      order o{};
      std::memcpy(&o, m->payload, sizeof o);
      key_.clear();
      value_.clear();
      kf::big_endian_codec<std::int64_t>::encode(o.order_id, key_);
      kf::trivial_codec<order>::encode(o, value_);
      rd_kafka_vu_t vu[4] = {};
      vu[0].vtype = RD_KAFKA_VTYPE_TOPIC;
      vu[0].u.cstr = output_.c_str();
      vu[1].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
      vu[1].u.i = RD_KAFKA_MSG_F_COPY;
      vu[2].vtype = RD_KAFKA_VTYPE_VALUE;
      vu[2].u.mem.ptr = value_.data();
      vu[2].u.mem.size = value_.size();
      vu[3].vtype = RD_KAFKA_VTYPE_KEY;
      vu[3].u.mem.ptr = key_.data();
      vu[3].u.mem.size = key_.size();
      check(rd_kafka_produceva(producer_, vu, 4), "produce");
    }
    rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(offsets, input_.c_str(), 0)->offset = got.back()->offset + 1;
    if (txn) {
      rd_kafka_consumer_group_metadata_t* group = rd_kafka_consumer_group_metadata(consumer_);
      check(rd_kafka_send_offsets_to_transaction(producer_, offsets, group, 30000), "send_offsets");
      rd_kafka_consumer_group_metadata_destroy(group);
      check(rd_kafka_commit_transaction(producer_, 30000), "commit_transaction");
    } else {
      if (rd_kafka_flush(producer_, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR || failed_ != 0) {
        std::fprintf(stderr, "flush: messages not acknowledged\n");
        std::exit(2);
      }
      if (rd_kafka_commit(consumer_, offsets, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        std::fprintf(stderr, "commit: refused\n");
        std::exit(2);
      }
    }
    rd_kafka_topic_partition_list_destroy(offsets);
    const auto n = static_cast<std::int64_t>(got.size());
    for (rd_kafka_message_t* m : got)
      rd_kafka_message_destroy(m);
    return n;
  }

 private:
  static void rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                        rd_kafka_topic_partition_list_t* partitions, void* opaque) {
    auto* self = static_cast<handwritten*>(opaque);
    if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      rd_kafka_assign(rk, nullptr);
      return;
    }
    // The claim: exactly once, in a transaction of its own, where the committed offsets are read.
    const bool txn = self->mode_ == mode::exactly_once;
    if (txn)
      check(rd_kafka_begin_transaction(self->producer_), "begin_transaction (claim)");
    rd_kafka_committed(rk, partitions, 30000);
    for (int i = 0; i < partitions->cnt; ++i)
      if (partitions->elems[i].offset < 0)
        partitions->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
    if (txn)
      check(rd_kafka_commit_transaction(self->producer_, 30000), "commit_transaction (claim)");
    rd_kafka_assign(rk, partitions);
  }

  static void delivered(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR)
      ++static_cast<handwritten*>(opaque)->failed_;
  }

  mode mode_;
  std::size_t failed_ = 0;

  std::string input_;
  std::string output_;
  std::size_t batch_;
  rd_kafka_t* consumer_ = nullptr;
  rd_kafka_t* producer_ = nullptr;
  std::vector<std::byte> key_;
  std::vector<std::byte> value_;
};

run_result handwritten_run(mode m, const std::string& input, std::int64_t n, std::size_t batch) {
  run_result r{.output = shared_cluster().output()};
  handwritten h(m, input, r.output, batch);
  std::int64_t done = 0;
  while (done == 0)
    done += h.unit();
  r.timed_records = n - done;
  const auto start = clock_type::now();
  while (done < n)
    done += h.unit();
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return r;
}

/// What a reader of `topic` sees: each message's key and value bytes, in offset order.
std::vector<std::pair<std::string, std::string>> read_topic(const std::string& topic) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  kf::properties p = shared_cluster().client();
  p["group.id"] = cluster::fresh("bench.rpw.reader");
  p["enable.partition.eof"] = "true";
  for (const auto& [k, v] : p)
    rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  std::vector<std::pair<std::string, std::string>> seen;
  const auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (clock_type::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (m == nullptr)
      continue;
    const bool end = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
      seen.emplace_back(std::string(static_cast<const char*>(m->key), m->key_len),
                        std::string(static_cast<const char*>(m->payload), m->len));
    rd_kafka_message_destroy(m);
    if (end)
      break;
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return seen;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct case_def final {
  std::size_t batch;
  std::int64_t records;
};
// Batch 1 is a transaction per record: fewer records keep a round short.
constexpr case_def cases[] = {{1, 300}, {64, 6400}, {512, 25600}};

const char* name_of(mode m) {
  return m == mode::exactly_once ? "exactly once" : "at least once";
}
constexpr mode modes[] = {mode::exactly_once, mode::at_least_once};

int verify() {
  bool ok = true;
  for (const mode m : modes) {
    for (const case_def& c : cases) {
      const std::string input = shared_cluster().input(c.records);
      const auto expected = read_topic(input);
      const run_result p = pipeline_run(m, input, c.records, c.batch);
      const run_result h = handwritten_run(m, input, c.records, c.batch);
      const auto from_pipeline = read_topic(p.output);
      const auto from_hand = read_topic(h.output);
      // The same values, in input order, each once; keyed alike (the key is the order id).
      bool same = from_pipeline.size() == expected.size() && from_pipeline == from_hand;
      for (std::size_t i = 0; same && i < expected.size(); ++i)
        same = from_pipeline[i].second == expected[i].second;
      std::printf("%-13s batch %-4zu %zu messages from %lld records: %s\n", name_of(m), c.batch,
                  from_pipeline.size(), static_cast<long long>(c.records),
                  same ? "the same as the hand-written loop's" : "DIFFERENT");
      ok = ok && same;
    }
  }
  return ok ? 0 : 1;
}

void compare(int rounds) {
  std::printf("%-13s %-10s %16s %16s %12s  %s\n", "", "case", "pipeline us/rec", "hand us/rec",
              "ratio (h/p)", "target (>= 0.9)");
  std::vector<double> exact_us;  // the transactional pipeline's, per case: the cost of exactness
  for (const mode m : modes) {
    std::size_t i = 0;
    for (const case_def& c : cases) {
      const std::string input = shared_cluster().input(c.records);
      std::vector<double> pipeline_us, hand_us, ratio;
      for (int r = 0; r < rounds; ++r) {
        run_result p, h;
        if (r % 2 == 0) {
          p = pipeline_run(m, input, c.records, c.batch);
          h = handwritten_run(m, input, c.records, c.batch);
        } else {
          h = handwritten_run(m, input, c.records, c.batch);
          p = pipeline_run(m, input, c.records, c.batch);
        }
        const double pu = p.seconds * 1e6 / static_cast<double>(p.timed_records);
        const double hu = h.seconds * 1e6 / static_cast<double>(h.timed_records);
        pipeline_us.push_back(pu);
        hand_us.push_back(hu);
        ratio.push_back(hu / pu);
      }
      const double md = median(ratio);
      const double pu = median(pipeline_us);
      std::printf("%-13s batch %-4zu %16.2f %16.2f %12.3f  %s", name_of(m), c.batch, pu,
                  median(hand_us), md, md >= 0.9 ? "met" : "MISSED");
      if (m == mode::exactly_once)
        exact_us.push_back(pu);
      else
        std::printf("   cost of exactness %.2fx", exact_us[i] / pu);
      std::printf("\n");
      ++i;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--verify") == 0)
    return verify();
  int rounds = 9;
  if (argc >= 3 && std::strcmp(argv[1], "--rounds") == 0)
    rounds = std::max(1, std::atoi(argv[2]));
  compare(rounds);
  return 0;
}
