// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/kafka/transactional_sink.hpp — a topic as the sink of
// TransactionalPosition: read, process, write to Kafka, exactly once.
//
//   kafka::transactional_sink<Row, Layout, Source>
//
// Each unit is one producer transaction: begin = begin_transaction, write = produce (the
// layout maps a row to a topic, a key, a value and headers), store position = stage the input
// offsets, commit = send_offsets_to_transaction with the consuming member's group metadata,
// then commit_transaction; rollback = abort_transaction. The group's offsets move only with the
// output (Kafka's KIP-447), and the group coordinator refuses the offsets of a member a
// rebalance replaced. The guarantee is exactly-once in the sink's state, where the state is the
// output topic as a read_committed reader sees it: an aborted attempt stays in the log, marked
// aborted, and a read_uncommitted reader is shown it.
//
// The positions are the consuming group's offsets, so the source is a kafka::group_source on
// the cluster the sink writes to (part rule KF8). The producer's transactional.id is the owner's,
// stable across its restarts (a restarted owner aborts its predecessor's open transaction by
// it); a sink that was fenced stays fenced, and its producer is never used again. A producer
// whose abort the coordinator refused as INVALID_TXN_STATE (an abort overtaking librdkafka's own
// retried AddPartitionsToTxn) is replaced by a new one under the same id.
//
//   transactional_sink<Row, Layout, Source>::dead_letters<Event, Letter>
//
// is where dead_letter<N> puts what it gives up on: a dead-letter topic written inside the same
// transactions, so a letter and the position that passes its record commit together (R21). A
// letter waits in the sink until a unit's staged position passes its record, is produced in
// that unit's transaction, and is forgotten once that commits; an aborted attempt's copy is
// marked aborted with the rest of it, and the letter goes into the next attempt.
#pragma once

#include <librdkafka/rdkafka.h>

#include <sys/types.h>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "commit_order/adapters/detail/table_description.hpp"
#include "commit_order/adapters/kafka/codec.hpp"
#include "commit_order/adapters/kafka/detail/client.hpp"
#include "commit_order/adapters/kafka/detail/consumer_core.hpp"
#include "commit_order/adapters/kafka/errors.hpp"
#include "commit_order/adapters/kafka/layout.hpp"
#include "commit_order/adapters/kafka/options.hpp"
#include "commit_order/adapters/kafka/source.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"

namespace commit_order::kafka {

/// What a transactional producer is told.
struct producer_options final {
  /// librdkafka properties (bootstrap.servers, ...). transactional.id, transaction.timeout.ms,
  /// enable.idempotence and acks are the sink's: giving them here is refused.
  properties config{};
  /// This owner's transactional.id: the same across its restarts, distinct between owners
  /// (one per process instance of the group). Never generated at start: a restarted owner
  /// under a new id cannot abort its predecessor's open transaction, which then holds back
  /// every read_committed reader of the output until transaction.timeout.ms.
  std::string transactional_id;
  /// How long a transaction may stay open before the broker aborts it (transaction.timeout.ms;
  /// at most the broker's transaction.max.timeout.ms, 15 minutes by default).
  std::chrono::milliseconds transaction_timeout{60000};
  /// How long each call to the transaction coordinator (init, send offsets, commit, abort) may
  /// take, retries included.
  std::chrono::milliseconds request_timeout{30000};
};

namespace detail {
/// Source is a group_source: its member's group metadata is what the coordinator checks.
template <class Source>
struct is_group_source : std::false_type {};
template <class Event, class Policy, class Codec>
struct is_group_source<group_source<Event, Policy, Codec>> : std::true_type {};

/// A dead letter, kept until the transaction that passes its record commits.
struct pending_letter final {
  std::string topic;
  partition_id partition;
  offset at;
  std::optional<std::vector<std::byte>> key;
  std::optional<std::vector<std::byte>> value;
  std::string reason;
  bool sent = false;  ///< produced in the transaction that is open or committing
};

/// The Letter the dead letters stand on once KF11 refused the one given: it declares what a
/// Letter has and defines none of it, so that the check's message is the one error.
struct refused_letter final {
  template <class Event>
  static std::optional<std::vector<std::byte>> key(const Event& e);
  template <class Event>
  static std::optional<std::vector<std::byte>> value(const Event& e);
};
}  // namespace detail

/// A Kafka topic written in producer transactions that carry the consuming group's offsets.
template <class Row, class Layout, class Source>
class transactional_sink final {
  static constexpr bool group_source_given = detail::is_group_source<Source>::value;
  static_assert(
      part_rules::require<part_rules::kafka_transactional_sink_source, group_source_given>());
  static constexpr bool maps_rows = layout<Layout, Row>;
  static_assert(part_rules::require<part_rules::kafka_layout_maps_row, maps_rows>());
  static constexpr bool members_called = !maps_rows || detail::layout_members_called<Layout, Row>;
  static_assert(part_rules::require<part_rules::kafka_layout_members, members_called>());

 public:
  using row_type = Row;
  using key_type = no_key;
  /// A log: every write appends (R5 asks no guard); Replicated: acks=all, which a
  /// transactional producer always uses.
  using capabilities = commit_order::capabilities<AppendOnly, Transactional, Replicated>;

  /// A sink writing through its own transactional producer, storing `source`'s group offsets.
  /// Keeps a reference: the source must outlive the sink. Initialises the producer's
  /// transactions (init_transactions), which aborts what a predecessor under the same
  /// transactional.id left open.
  transactional_sink(Source& source, Layout layout, producer_options options)
      : source_(&source)
      , client_(client_of(source))
      , writer_(std::move(layout))
      , options_(std::move(options)) {
    if (client_ == nullptr)
      return;  // refused by KF8: its message is the one error
    if (client_->group_id().empty())
      refuse("the source has no group.id, and the positions are its group's offsets");
    if (options_.transactional_id.empty())
      refuse(
          "producer_options.transactional_id is empty: give each owner an id of its own, the "
          "same across its restarts (a generated one cannot abort its predecessor's open "
          "transaction, which then holds back every read_committed reader until "
          "transaction.timeout.ms)");
    if (options_.transaction_timeout <= std::chrono::milliseconds{0})
      refuse("producer_options.transaction_timeout must be positive");
    create_producer();
    check_same_cluster();
  }

  transactional_sink(const transactional_sink&) = delete;
  transactional_sink& operator=(const transactional_sink&) = delete;
  ~transactional_sink() {
    if (in_transaction_)
      rollback();
  }

  /// The dead-letter topic of this sink's transactions: `with_dead_letters<sink_t::
  /// dead_letters<Event, Letter>>`, built on the sink the pipeline writes through (the pipeline
  /// checks it is the same object). Event is the pipeline's source event; Letter gives a
  /// letter's key and value bytes (commit_order::letter_format, e.g. kafka::letter_bytes<Codec>
  /// for `decoded` events). Each letter's message carries the record's coordinates and the
  /// reason in headers: commit_order.source.topic, commit_order.source.partition and
  /// commit_order.source.offset (decimal text), commit_order.reason.
  template <class Event, class Letter>
  class dead_letters final {
    static_assert(part_rules::require<part_rules::kafka_letter_format,
                                      commit_order::letter_format<Letter, Event>>());
    using letter_type = std::conditional_t<commit_order::letter_format<Letter, Event>, Letter,
                                           detail::refused_letter>;

   public:
    using sink_type = transactional_sink;
    /// Committed by the sink's transactions (R21), at the sink's durability.
    using capabilities = commit_order::capabilities<Replicated, CommitsWithSink>;

    /// Letters to `topic`, in `sink`'s transactions; keeps a reference: the sink must outlive
    /// them. The topic may not be empty nor the one the sink's source reads (each letter would
    /// be read again as a record).
    dead_letters(transactional_sink& sink, std::string topic)
        : sink_(&sink), topic_(std::move(topic)) {
      if (topic_.empty())
        refuse("the dead-letter topic is empty: name the topic the letters go to");
      if (sink.client_ != nullptr && topic_ == sink.client_->topic())
        refuse("the dead-letter topic '" + topic_ +
               "' is the topic the source reads: each letter would be read again as a record -- "
               "give the letters a topic of their own");
    }

    /// Keeps the letter of the record at offset `o` of partition `k`, for the transaction whose
    /// position passes the record: durable once that commits, never before. A letter of the
    /// same record kept already is left as it is.
    void put(partition_id k, offset o, const Event& e, const char* reason) {
      sink_->keep_letter(detail::pending_letter{topic_, k, o, letter_type::key(e),
                                                letter_type::value(e),
                                                reason != nullptr ? reason : "", false});
    }

    [[nodiscard]] const transactional_sink& sink() const noexcept { return *sink_; }
    [[nodiscard]] const std::string& topic() const noexcept { return topic_; }

   private:
    transactional_sink* sink_;
    std::string topic_;
  };

  // ---- the unit -----------------------------------------------------------------------------

  void begin() {
    rethrow_if_fenced();
    replace_if_retired();
    settle();
    // Whatever a letter was produced in has ended: committed letters are gone (commit, settle),
    // and an aborted attempt's go into the next transaction that passes their records.
    for (detail::pending_letter& l : letters_)
      l.sent = false;
    unit_began_ = clock::now();
    staged_.clear();
    if (detail::error_ptr e{rd_kafka_begin_transaction(rk_.get())})
      fail("beginning a transaction", std::move(e));
    in_transaction_ = true;
  }

  void apply(partition_id k, offset o, const Row& row) {
    if constexpr (maps_rows)
      produce(k, o, row);
  }

  void store_position(partition_id k, position p) {
    const auto it = std::ranges::find(staged_, k, &start_at::partition);
    if (it == staged_.end())
      staged_.push_back(start_at{k, p});
    else
      it->at = p;
  }
  /// The coordinator checks the owner (the member's generation) when the offsets are sent.
  void store_position(partition_id k, position p, epoch) { store_position(k, p); }

  /// Sends the staged offsets with the member's group metadata, then commits: both land, or
  /// neither. A retriable answer to the commit is retried, as librdkafka prescribes; one that
  /// needs an abort aborts (the unit is read again from the last committed offsets); a fencing
  /// answer is `fenced` (or `transaction_timed_out`, when the unit outlived the timeout).
  void commit() {
    rethrow_if_fenced();
    if (!staged_.empty()) {
      produce_letters();
      detail::list_ptr offsets = detail::make_list(static_cast<int>(staged_.size()));
      for (const start_at& s : staged_)
        rd_kafka_topic_partition_list_add(offsets.get(), client_->topic().c_str(),
                                          s.partition.value())
            ->offset = s.at.value();
      rd_kafka_consumer_group_metadata_t* group =
          rd_kafka_consumer_group_metadata(client_->handle());
      detail::error_ptr sent = retried([&](int ms) {
        return rd_kafka_send_offsets_to_transaction(rk_.get(), offsets.get(), group, ms);
      });
      rd_kafka_consumer_group_metadata_destroy(group);
      if (sent)
        fail("sending the unit's offsets to its transaction", std::move(sent));
    }
    if (detail::error_ptr e =
            retried([&](int ms) { return rd_kafka_commit_transaction(rk_.get(), ms); })) {
      if (rd_kafka_error_is_retriable(e.get())) {
        // Sent, unanswered: librdkafka finishes it when called again (settle), never aborts it.
        in_transaction_ = false;
        staged_.clear();
        pending_ = ending::commit;
        throw commit_in_doubt(rd_kafka_error_code(e.get()), rd_kafka_error_string(e.get()));
      }
      fail("committing a transaction", std::move(e));
    }
    in_transaction_ = false;
    staged_.clear();
    ++commits_;
    replacements_since_commit_ = 0;
    forget_sent_letters();
  }

  void rollback() noexcept {
    staged_.clear();
    if (!in_transaction_)
      return;
    in_transaction_ = false;
    if (dead_)
      return;  // a fenced producer's transaction is aborted by the coordinator, or was never sent
    if (detail::error_ptr e =
            retried([&](int ms) { return rd_kafka_abort_transaction(rk_.get(), ms); })) {
      ++failed_aborts_;
      const rd_kafka_resp_err_t code = rd_kafka_error_code(e.get());
      if (rd_kafka_error_is_retriable(e.get()))
        pending_ = ending::abort;  // unfinished: called again before the next unit (settle)
      else if (is_fencing(code) && !by_coordinator(code))
        dead_ = fencing_error("aborting a transaction", code);
      else if (rd_kafka_error_is_fatal(e.get()) && code == RD_KAFKA_RESP_ERR_INVALID_TXN_STATE &&
               replacements_since_commit_ < max_replacements)
        // The coordinator refused an abort that reached a transaction it had already finished:
        // librdkafka's abort overtook its own retried AddPartitionsToTxn, right after the
        // previous unit committed, and librdkafka makes that fatal to the producer. The
        // producer's epoch was current (a stale one is answered as fenced), nothing of the unit
        // committed, and the next unit begins with a new producer under the id.
        retired_ = true;
      else  // failed for good: the coordinator aborts at its timeout; the producer is not reused
        dead_ = std::make_exception_ptr(
            client_error("aborting a transaction", code, rd_kafka_error_string(e.get())));
    }
  }

  // ---- positions and owners -------------------------------------------------------------------

  /// The group's committed offset of input partition k. read_committed (the source's own
  /// setting), so a transaction still committing offsets is waited for, never read around: a
  /// predecessor's, which may stay open until the transaction timeout, is waited for that long
  /// (and the request timeout), whatever the consumer's own request timeout.
  [[nodiscard]] std::optional<position> load_position(partition_id k) const {
    const auto deadline = clock::now() + options_.transaction_timeout + options_.request_timeout;
    for (;;) {
      try {
        return client_->committed(k);
      } catch (const client_error& e) {
        const bool waiting = e.code() == RD_KAFKA_RESP_ERR_UNSTABLE_OFFSET_COMMIT ||
                             e.code() == RD_KAFKA_RESP_ERR__TIMED_OUT;
        if (!waiting || clock::now() >= deadline)
          throw;
      }
    }
  }
  /// The owner is the member at group generation `e`, which the coordinator checks at each
  /// commit: nothing is written here.
  /// A retired producer is replaced first: its init aborts what the old one left open, which
  /// the offset fetch would otherwise wait for until the transaction timeout.
  /// A claim forgets the partition's letters that wait for a transaction: its records are
  /// read again from the claimed position, and given up on again if they fail again.
  [[nodiscard]] std::optional<position> claim(partition_id k, epoch) {
    replace_if_retired();
    forget_letters(k);
    return load_position(k);
  }
  [[nodiscard]] claimed claim_next(partition_id k) {
    replace_if_retired();
    forget_letters(k);
    return claimed{epoch::of(0, generation().value_or(0)), load_position(k)};
  }

  // ---- what the sink counts -----------------------------------------------------------------

  /// Transactions committed so far (claims' empty ones included).
  [[nodiscard]] std::size_t commits() const noexcept { return commits_; }
  /// Messages produced so far, dead letters and aborted attempts included.
  [[nodiscard]] std::size_t produced() const noexcept { return produced_; }
  /// Aborts that failed: unfinished ones are finished before the next unit, a refused one
  /// retires the producer (replaced_producers), any other ends the sink (the coordinator
  /// aborts at the timeout).
  [[nodiscard]] std::size_t failed_aborts() const noexcept { return failed_aborts_; }
  /// Producers replaced, each after an abort the coordinator refused as INVALID_TXN_STATE.
  [[nodiscard]] std::size_t replaced_producers() const noexcept { return replaced_; }
  /// Dead letters committed so far, and those waiting for a transaction that passes their
  /// records.
  [[nodiscard]] std::size_t letters_committed() const noexcept { return letters_committed_; }
  [[nodiscard]] std::size_t letters_waiting() const noexcept { return letters_.size(); }
  [[nodiscard]] const producer_options& options() const noexcept { return options_; }

 private:
  using clock = std::chrono::steady_clock;

  /// How a transaction librdkafka has not finished ending must end: its commit was sent and
  /// unanswered (commit_in_doubt), or its abort was.
  enum class ending { none, commit, abort };

  /// `call(timeout_ms)` until it succeeds, fails for good, or request_timeout is spent (a
  /// timed-out commit, abort or offsets send is resumed by calling it again, as rdkafka.h
  /// prescribes); the last error, or none.
  template <class Call>
  detail::error_ptr retried(Call&& call) const {
    const auto deadline = clock::now() + options_.request_timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
      detail::error_ptr e{call(static_cast<int>(std::max<std::int64_t>(left, 1)))};
      if (!e || !rd_kafka_error_is_retriable(e.get()) || clock::now() >= deadline)
        return e;
    }
  }

  /// Finishes the transaction a timed-out commit or abort left: before anything else begins,
  /// so that recovery reads the group's offsets as that transaction left them.
  void settle() {
    if (pending_ == ending::none)
      return;
    const bool committing = pending_ == ending::commit;
    detail::error_ptr e = retried([&](int ms) {
      return committing ? rd_kafka_commit_transaction(rk_.get(), ms)
                        : rd_kafka_abort_transaction(rk_.get(), ms);
    });
    if (!e) {
      pending_ = ending::none;
      if (committing) {
        ++commits_;
        replacements_since_commit_ = 0;
        forget_sent_letters();
      }
      return;
    }
    if (rd_kafka_error_is_retriable(e.get())) {
      if (committing)
        throw commit_in_doubt(rd_kafka_error_code(e.get()), rd_kafka_error_string(e.get()));
      throw client_error("finishing the abort of a transaction", rd_kafka_error_code(e.get()),
                         rd_kafka_error_string(e.get()));
    }
    pending_ = ending::none;
    in_transaction_ = committing;  // an abortable answer to the resumed commit: abort it
    fail(committing ? "finishing a transaction's commit" : "finishing a transaction's abort",
         std::move(e));
  }

  /// Produces the message `row` (of record `o` of input partition `k`) becomes, inside the
  /// open transaction.
  void produce(partition_id k, offset o, const Row& row) {
    if (detail::error_ptr e = writer_.produce(rk_.get(), k, o, row))
      fail("producing to " + writer_.topic(), std::move(e));
    ++produced_;
  }

  void keep_letter(detail::pending_letter l) {
    const auto same = std::ranges::find_if(letters_, [&](const detail::pending_letter& x) {
      return x.partition == l.partition && x.at == l.at;
    });
    if (same == letters_.end())
      letters_.push_back(std::move(l));
  }

  /// Produces, in the open transaction, each waiting letter whose record a staged position
  /// passes (a position is the next offset to read: it passes the offsets below it).
  void produce_letters() {
    for (detail::pending_letter& l : letters_) {
      const auto passing = std::ranges::find(staged_, l.partition, &start_at::partition);
      if (l.sent || passing == staged_.end() || passing->at.value() <= l.at.value())
        continue;
      if (detail::error_ptr e = produce_letter(l)) {
        const bool too_large = rd_kafka_error_code(e.get()) == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
        fail("producing the dead letter of offset " + std::to_string(l.at.value()) +
                 " of partition " + std::to_string(l.partition.value()) + " to " + l.topic +
                 (too_large ? " (the letter is larger than message.max.bytes: its record is read "
                              "again at every poll until the limit is raised or the Letter keeps "
                              "less)"
                            : ""),
             std::move(e));
      }
      l.sent = true;
      ++produced_;
    }
  }

  detail::error_ptr produce_letter(const detail::pending_letter& l) {
    const std::string partition = std::to_string(l.partition.value());
    const std::string at = std::to_string(l.at.value());
    const std::string& from = client_->topic();
    std::vector<rd_kafka_vu_t> vu(2);
    vu[0].vtype = RD_KAFKA_VTYPE_TOPIC;
    vu[0].u.cstr = l.topic.c_str();
    vu[1].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
    vu[1].u.i = RD_KAFKA_MSG_F_COPY;
    static std::byte none{};
    const auto bytes = [](const std::vector<std::byte>& b) -> void* {
      return b.empty() ? &none : const_cast<std::byte*>(b.data());
    };
    if (l.key) {  // none: a null key, as the record had
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = RD_KAFKA_VTYPE_KEY;
      u.u.mem.ptr = bytes(*l.key);
      u.u.mem.size = l.key->size();
    }
    if (l.value) {  // none: a null value
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = RD_KAFKA_VTYPE_VALUE;
      u.u.mem.ptr = bytes(*l.value);
      u.u.mem.size = l.value->size();
    }
    const auto header = [&](const char* name, const std::string& value) {
      rd_kafka_vu_t& u = vu.emplace_back();
      u.vtype = RD_KAFKA_VTYPE_HEADER;
      u.u.header.name = name;
      u.u.header.val = value.data();
      u.u.header.size = static_cast<ssize_t>(value.size());
    };
    header("commit_order.source.topic", from);
    header("commit_order.source.partition", partition);
    header("commit_order.source.offset", at);
    header("commit_order.reason", l.reason);
    for (;;) {
      detail::error_ptr e{rd_kafka_produceva(rk_.get(), vu.data(), vu.size())};
      if (!e || rd_kafka_error_code(e.get()) != RD_KAFKA_RESP_ERR__QUEUE_FULL)
        return e;
      rd_kafka_poll(rk_.get(), 10);  // the local queue is full: let deliveries drain it
    }
  }

  /// The letters the transaction that just committed carried are durable: forgotten.
  void forget_sent_letters() {
    letters_committed_ += static_cast<std::size_t>(
        std::erase_if(letters_, [](const detail::pending_letter& l) { return l.sent; }));
  }
  void forget_letters(partition_id k) {
    std::erase_if(letters_, [&](const detail::pending_letter& l) { return l.partition == k; });
  }

  // None once KF8 refused the source, so that its message is the one error.
  static detail::client_core* client_of(Source& source) {
    if constexpr (group_source_given)
      return &source.client();
    else
      return nullptr;
  }
  [[nodiscard]] std::optional<std::int32_t> generation() const {
    if constexpr (group_source_given)
      return source_->generation();
    else
      return std::nullopt;
  }

  [[noreturn]] static void refuse(const std::string& why) {
    throw configuration_refused("commit_order::kafka::transactional_sink: " + why);
  }

  [[nodiscard]] int timeout_ms() const noexcept {
    return static_cast<int>(options_.request_timeout.count());
  }

  /// The consuming group's offsets can be committed in a transaction only on the cluster that
  /// holds the group: a producer of another cluster would be answered as a member unknown there.
  void check_same_cluster() const {
    const auto id_of = [this](rd_kafka_t* rk) {
      char* id = rd_kafka_clusterid(rk, timeout_ms());
      std::string s = id == nullptr ? "" : id;
      if (id != nullptr)
        rd_kafka_mem_free(rk, id);
      return s;
    };
    const std::string read = id_of(client_->handle());
    const std::string written = id_of(rk_.get());
    if (read.empty() || written.empty())
      throw client_error("reading the cluster ids of the source's consumer and the sink's producer",
                         RD_KAFKA_RESP_ERR__TIMED_OUT,
                         "the sink must know both are one cluster before it commits the group's "
                         "offsets in its transactions");
    if (read != written)
      refuse("the source reads cluster " + read + " and the sink writes cluster " + written +
             ": a transaction commits the group's offsets only on the cluster that holds the "
             "group -- write the output to the source's cluster");
  }

  void create_producer() {
    char err[512];
    detail::conf_ptr conf = detail::producer_conf(
        options_.config,
        {{"transactional.id", detail::conf_scope::global, options_.transactional_id,
          "it is the sink's: set producer_options.transactional_id"},
         {"transaction.timeout.ms", detail::conf_scope::global,
          std::to_string(options_.transaction_timeout.count()),
          "it is the sink's: set producer_options.transaction_timeout"}},
        "producer_options.config");
    // No delivery callback: a message the brokers did not take fails the commit, which aborts.
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf.get(), err, sizeof err);
    if (rk == nullptr)
      refuse(err);
    (void)conf.release();
    rk_.reset(rk);
    if (detail::error_ptr e =
            retried([&](int ms) { return rd_kafka_init_transactions(rk_.get(), ms); }))
      throw client_error(
          "initialising the transactions of transactional.id " + options_.transactional_id,
          rd_kafka_error_code(e.get()), rd_kafka_error_string(e.get()));
  }

  /// Answers by which the broker says another owner holds what this one writes: a newer
  /// producer under the same transactional.id, or a rebalance that replaced the member.
  static constexpr bool is_fencing(rd_kafka_resp_err_t c) noexcept {
    return c == RD_KAFKA_RESP_ERR__FENCED || c == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
           c == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH ||
           c == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || c == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
           c == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID;
  }

  /// The unit's first partition and the epoch it is owned at, as a fenced error names them.
  [[nodiscard]] std::pair<partition_id, epoch> owner() const {
    const partition_id k = staged_.empty() ? partition_id{0} : staged_.front().partition;
    return {k, epoch::of(0, generation().value_or(0))};
  }

  /// Fencing answers of the group coordinator: a rebalance replaced this member.
  static constexpr bool by_coordinator(rd_kafka_resp_err_t c) noexcept {
    return c == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION || c == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
           c == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID;
  }

  /// The error a fencing answer to `operation` becomes: `transaction_timed_out` when the unit
  /// outlived the timeout (the broker aborted it and bumped the producer's epoch, so it
  /// answers as it would a zombie), `fenced` otherwise, naming who refused this owner.
  [[nodiscard]] std::exception_ptr fencing_error(const std::string& operation,
                                                 rd_kafka_resp_err_t code) const {
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - unit_began_);
    if (!by_coordinator(code) && elapsed > options_.transaction_timeout)
      return std::make_exception_ptr(
          transaction_timed_out(operation, code, elapsed, options_.transaction_timeout));
    const std::string what = std::string(rd_kafka_err2name(code)) + ", " + operation;
    const std::string by = by_coordinator(code)
                               ? "the group coordinator refused its offsets (" + what +
                                     "): a rebalance gave its partitions to another member"
                               : "a newer producer under transactional.id '" +
                                     options_.transactional_id + "' fenced this one (" + what +
                                     "; if two running owners share the id, give each its own: "
                                     "a restart of either fences the other)";
    const auto [k, mine] = owner();
    return std::make_exception_ptr(fenced(mine, k, by));
  }

  /// What librdkafka answered to `operation`, as the library's error. Fencing (or any fatal
  /// error) ends the producer: the error is kept and thrown again by every later call. An
  /// abortable one aborts the transaction and is thrown as a client_error (the world's: the
  /// pipeline reads the unit again from the committed offsets at its next poll).
  [[noreturn]] void fail(const std::string& operation, detail::error_ptr e) {
    const rd_kafka_resp_err_t code = rd_kafka_error_code(e.get());
    const std::string text = rd_kafka_error_string(e.get());
    const bool fatal = rd_kafka_error_is_fatal(e.get()) != 0;
    const bool abortable = rd_kafka_error_txn_requires_abort(e.get()) != 0;
    const bool fencing = is_fencing(code);
    // Named first: a fenced error names the unit's first partition, which the abort forgets.
    std::exception_ptr why;
    if (fencing)
      why = fencing_error(operation, code);
    else if (fatal)
      why = std::make_exception_ptr(client_error(operation, code, text + " (fatal)"));
    else if (abortable && in_transaction_)
      why = std::make_exception_ptr(client_error(
          operation, code, text + "; the transaction was aborted: its records are read again"));
    else  // not the transaction's error: it stays open, and the pipeline rolls it back
      why = std::make_exception_ptr(client_error(operation, code, text));
    if (abortable && !fatal) {
      rollback();  // aborted where librdkafka still can: nothing waits for the timeout
    } else if (fencing || fatal) {
      in_transaction_ = false;
      staged_.clear();
    }
    // The coordinator refusing a replaced member leaves the producer sound: once the member
    // rejoins, its next claim starts from the group's offsets. A producer fenced by a newer
    // one, or failed fatally, is never used again. (A fatal answer to the commit may follow a
    // commit the broker made: librdkafka's "succeeded on the broker but failed locally".)
    if (fatal || (fencing && !by_coordinator(code)))
      dead_ = why;
    std::rethrow_exception(why);
  }

  /// A new producer under the same transactional.id, in place of one a refused abort retired
  /// (librdkafka refuses every call of a producer in a fatal state). Its init_transactions
  /// bumps the id's epoch and aborts what the old one left open, as a restart of the owner
  /// would, and fences any other holder of the id, as a restart would too. Before the next
  /// claim or unit, so that the claim reads the group's offsets with nothing open. At most
  /// max_replacements without a commit between them: past that, the refusal ends the sink.
  void replace_if_retired() {
    if (!retired_)
      return;
    rk_.reset();
    create_producer();
    retired_ = false;
    ++replaced_;
    ++replacements_since_commit_;
  }

  void rethrow_if_fenced() const {
    if (dead_)
      std::rethrow_exception(dead_);
  }

  Source* source_;
  detail::client_core* client_;
  detail::message_writer<Row, Layout> writer_;
  producer_options options_;
  detail::handle_ptr rk_;
  std::vector<start_at> staged_;
  std::vector<detail::pending_letter> letters_;  // waiting for a transaction that passes them
  std::exception_ptr dead_;                      // why the producer may not be used again
  clock::time_point unit_began_{};
  bool in_transaction_ = false;
  bool retired_ = false;  // an abort refused as INVALID_TXN_STATE: replaced before what is next
  ending pending_ = ending::none;
  std::size_t produced_ = 0;
  std::size_t commits_ = 0;
  std::size_t failed_aborts_ = 0;
  std::size_t replaced_ = 0;
  std::size_t letters_committed_ = 0;
  std::size_t replacements_since_commit_ = 0;
  /// Refused aborts survived without a commit between them: one refusal follows a unit that
  /// committed, so a refusal after several fresh producers is something else.
  static constexpr std::size_t max_replacements = 3;
};

}  // namespace commit_order::kafka
