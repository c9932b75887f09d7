// SPDX-License-Identifier: BSL-1.0
// The conformance kit fails adapters that break what they declare: each broken part of
// broken_parts.hpp is caught by the check that covers its promise (a kit that passed them would
// prove nothing about the adapters it passes). Label `unit`.
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <commit_order/testing/adversarial.hpp>
#include <commit_order/testing/conformance.hpp>

#include "conformance/broken_parts.hpp"
#include "conformance/hostile_event.hpp"
#include "conformance/memory_fixture.hpp"

namespace co = commit_order;
namespace ct = commit_order::testing;
namespace broken = conformance::broken;
using conformance::kit_event;

namespace {

ct::conformance_options only(bool capabilities, bool synced, bool matrix, bool schedules) {
  ct::conformance_options o;
  o.capabilities = capabilities;
  o.synced = synced;
  o.crash_matrix = matrix;
  o.schedules = schedules;
  o.matrix_records = 8;
  o.matrix_batches = {1, 3};
  o.matrix_splits = {0};
  o.schedule_count = 60;
  o.max_cut_points = 20;
  return o;
}

/// The check ran (at least `min_scenarios`), and failed with a description containing `says`.
void expect_failed(const ct::report& r, const std::string& check, const std::string& says,
                   std::size_t min_scenarios = 1) {
  INFO(r.summary());
  const auto* c = r.find(check);
  REQUIRE_MESSAGE(c != nullptr, "the check '" << check << "' did not run");
  CHECK(c->scenarios >= min_scenarios);
  CHECK_FALSE(c->passed());
  bool found = false;
  for (const auto& f : c->failures)
    found = found || f.find(says) != std::string::npos;
  CHECK_MESSAGE(found, "no failure of '" << check << "' says '" << says << "'");
}

void expect_passed(const ct::report& r, const std::string& check) {
  INFO(r.summary());
  const auto* c = r.find(check);
  REQUIRE_MESSAGE(c != nullptr, "the check '" << check << "' did not run");
  CHECK(c->scenarios > 0);
  CHECK(c->passed());
}

const std::string idempotent = "Idempotent: a replay rewrites its row, never adds one";
const std::string guarded = "OffsetGuarded: an older offset never replaces a newer row";
const std::string transactional =
    "Transactional: a rollback is discarded, a commit survives reopening";
const std::string store = "position store: nothing before the first commit, each commit survives";
const std::string retention = "retention: a lagging reader gets position_lost, never a jump";

}  // namespace

TEST_CASE("the kit fails a sink that declares Idempotent and appends") {
  const auto r = ct::run_conformance<broken::fixture<broken::appending_idempotent_sink>>(
      "appending 'Idempotent' sink", only(true, false, true, true));
  expect_failed(r, idempotent, "the sink holds {key 0 @0, key 0 @0, key 1 @1, key 1 @1}");
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "rows (a duplicate row");
  expect_failed(r, "random schedules", "COMMIT_ORDER_CONFORMANCE_SEED=");
  // Not even AtMostOnce, which never replays: every record of a key adds a row.
  expect_failed(r, "crash matrix AtMostOnce<EveryBatch>", "rows (a duplicate row");
}

TEST_CASE("the kit fails a sink that declares OffsetGuarded and lets older offsets win") {
  const auto r = ct::run_conformance<broken::fixture<broken::unguarded_sink>>(
      "unguarded 'OffsetGuarded' sink", only(true, false, true, false));
  expect_failed(r, guarded, "an older offset (3 after 5) was reported applied");
  expect_failed(r, guarded, "the sink holds {key 0 @3}, expected {key 0 @5}");
  // A replay writes older rows over newer ones, which the regression watch sees.
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "went back to an older offset");
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "the offset guard absorbed 0 of");
}

TEST_CASE("the kit fails a sink that declares OffsetGuarded, reports nothing and lets older win") {
  const auto r = ct::run_conformance<broken::fixture<broken::silent_unguarded_sink>>(
      "silent unguarded 'OffsetGuarded' sink", only(true, false, true, false));
  expect_failed(r, guarded, "the sink holds {key 0 @3}, expected {key 0 @5}");
  // Without apply()'s reports there is no absorbed count to compare; the rows still show it.
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "went back to an older offset");
  const auto* c = r.find("crash matrix AtLeastOnce<EveryBatch>");
  REQUIRE(c != nullptr);
  for (const auto& f : c->failures)
    CHECK(f.find("the offset guard absorbed") == std::string::npos);
}

TEST_CASE("the kit fails a sink that declares no guard and reports replays absorbed") {
  const auto r = ct::run_conformance<broken::fixture<broken::secretly_guarded_sink>>(
      "secretly guarded sink", only(false, false, true, false));
  // Replays happen under AtLeastOnce; the sink keeps them out and says so.
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>",
                "an unguarded sink reported an absorbed replay");
  // AtMostOnce replays nothing: nothing to report.
  expect_passed(r, "crash matrix AtMostOnce<EveryBatch>");
}

TEST_CASE("the kit fails a source that hands out a batch's records out of order") {
  using fixture =
      broken::fixture<broken::honest_sink<>, co::memory::position_store<>, broken::reversing_log>;
  const auto r = ct::run_conformance<fixture>("reversing log", only(false, false, true, false));
  // Batches of one record are in order; of three, they are not.
  expect_failed(r, "crash matrix AtLeastOnce<EveryBatch>", "where the partition's next record is");
}

TEST_CASE("the kit fails a sink that declares Transactional and keeps rolled-back rows") {
  const auto r = ct::run_conformance<broken::fixture<broken::leaky_rollback_sink>>(
      "leaky rollback sink", only(true, false, true, false));
  expect_failed(r, transactional, "after the rollback: the sink holds {key 0 @0, key 1 @1}");
  expect_passed(r, idempotent);
  expect_passed(r, guarded);
  // A crash inside the transaction leaves its rows behind a position that does not cover them.
  expect_failed(r, "crash matrix TransactionalPosition<EveryBatch>",
                "after the crash and reopening: key");
}

TEST_CASE("the kit fails a position store that loses commits in a crash") {
  using fixture = broken::fixture<broken::honest_sink<co::Buffered>, broken::forgetful_store,
                                  co::memory::log<kit_event, co::Buffered>>;
  const auto r = ct::run_conformance<fixture>("forgetful store", only(true, false, true, false));
  expect_failed(r, store, "after commit(3) and reopening the store holds none");
  expect_failed(r, "crash matrix AtLeastOnce<EveryRecord>",
                "neither the crashed unit's start nor its end");
  expect_passed(r, idempotent);
}

TEST_CASE("the kit fails a source that jumps a lagging reader past deleted records") {
  using fixture =
      broken::fixture<broken::honest_sink<>, co::memory::position_store<>, broken::jumping_log>;
  const auto r = ct::run_conformance<fixture>("jumping log", only(true, false, false, false));
  expect_failed(r, retention, "(a jump over [1, ");
}

TEST_CASE("a declared Synced without a power-cut facility is a failure, never a pass") {
  using fixture =
      broken::fixture<broken::honest_sink<co::Synced>, co::memory::position_store<co::Synced>,
                      co::memory::log<kit_event, co::Synced>>;
  const auto r =
      ct::run_conformance<fixture>("Synced parts, no power", only(false, true, false, false));
  CHECK_FALSE(r.passed());
  // Nothing could run (0 scenarios), and that is reported as a failure of each part.
  expect_failed(r, "Synced sink: every acknowledged write survives a power cut",
                "no power-cut facility", 0);
  expect_failed(r, "Synced position store: every acknowledged write survives a power cut",
                "no power-cut facility", 0);
  expect_failed(r, "Synced source: every acknowledged write survives a power cut",
                "no power-cut facility", 0);
}

TEST_CASE("the power-cut check fails a store that acknowledges commits before syncing them") {
  using lazy = broken::fixture<broken::honest_sink<co::Buffered>, broken::disk_store<2>,
                               co::memory::log<kit_event, co::Buffered>>;
  using honest = broken::fixture<broken::honest_sink<co::Buffered>, broken::disk_store<1>,
                                 co::memory::log<kit_event, co::Buffered>>;
  const std::string check =
      "Synced position store: the last acknowledged commit survives a power cut";
  const auto bad = ct::run_conformance<lazy>("lazy Synced store", only(false, true, false, false));
  expect_failed(bad, check, "was acknowledged");
  const auto good =
      ct::run_conformance<honest>("honest Synced store", only(false, true, false, false));
  expect_passed(good, check);
  // Every sync point of the workload was a cut point: one commit, one sync.
  CHECK(good.find(check)->scenarios == 6 + 1);
}

TEST_CASE("a report counts scenarios and failures per check and lists what did not run") {
  ct::report r;
  r.adapter = "example";
  auto& a = r.add("a");
  a.scenarios = 3;
  auto& b = r.add("b");
  b.scenarios = 2;
  b.fail("broken");
  r.not_run.push_back("c: not declared");
  CHECK(r.scenarios() == 5);
  CHECK(r.failures() == 1);
  CHECK_FALSE(r.passed());
  CHECK(r.failure_descriptions() == std::vector<std::string>{"example: b: broken"});
  const std::string s = r.summary();
  CHECK(s.find("FAIL  b: 2 scenarios, 1 failures") != std::string::npos);
  CHECK(s.find("not run: c: not declared") != std::string::npos);
}

// ---- the transactional-log section -----------------------------------------------------------

namespace {

using log_fixture = conformance::transactional_log_fixture;
using observed = std::vector<ct::observed_row<kit_event>>;

/// A reader blind to the isolation level: its read_committed view shows aborted messages too (as
/// librdkafka's mock cluster does).
class isolation_blind_fixture : public log_fixture {
 public:
  observed rows() { return log_fixture::uncommitted_rows(); }
};

/// A fixture that reads one view twice: its read_uncommitted view is the committed one.
class one_view_fixture : public log_fixture {
 public:
  observed uncommitted_rows() { return log_fixture::rows(); }
};

/// Both views in key order rather than log order (rows reordered by key).
class key_ordered_fixture : public log_fixture {
 public:
  observed rows() { return by_key(log_fixture::rows()); }
  observed uncommitted_rows() { return by_key(log_fixture::uncommitted_rows()); }

 private:
  static observed by_key(observed v) {
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.key < b.key; });
    return v;
  }
};

/// A zombie's write: each record's committed copy is told to be its first message in the log, so
/// an aborted attempt of it stands after the copy, as a fenced-too-late owner's would.
class zombie_fixture : public log_fixture {
 public:
  observed rows() {
    observed committed = log_fixture::rows();
    const observed all = log_fixture::uncommitted_rows();
    for (auto& r : committed)
      for (const auto& a : all)
        if (a.source_partition == r.source_partition && a.source_offset == r.source_offset) {
          r.log_offset = a.log_offset;
          break;
        }
    return committed;
  }
};

const std::string log_section = "transactional log TransactionalPosition<EveryBatch>";

}  // namespace

TEST_CASE("the transactional-log section passes the model and shows its aborted attempts") {
  const auto r = ct::run_conformance<log_fixture>("memory::transactional_log",
                                                  only(false, false, true, false));
  INFO(r.summary());
  CHECK(r.passed());
  const auto* c = r.find(log_section);
  REQUIRE(c != nullptr);
  CHECK(c->scenarios > 0);
  CHECK(c->measured.at("aborted attempts shown") > 0);
  CHECK(c->measured.at("crashes leaving attempts") > 0);
  // Every policy the rules allow over a log gets its section, beside its crash matrix.
  CHECK(r.find("transactional log TransactionalPosition<EveryRecord>") != nullptr);
  CHECK(r.find("transactional log AtMostOnce<EveryBatch>") != nullptr);
}

TEST_CASE("the transactional-log section fails a read_committed reader shown aborted messages") {
  const auto r = ct::run_conformance<isolation_blind_fixture>("isolation-blind reader",
                                                              only(false, false, true, false));
  expect_failed(r, log_section, "a read_committed consumer would be given a record again");
  expect_failed(r, "crash matrix TransactionalPosition<EveryBatch>", "it was written durably 1");
}

TEST_CASE("the transactional-log section fails a fixture that reads one view twice") {
  const auto r =
      ct::run_conformance<one_view_fixture>("one view twice", only(false, false, true, false));
  expect_failed(r, log_section, "no crash left an aborted attempt");
  // The records themselves are right: the crash matrix alone passes it.
  expect_passed(r, "crash matrix TransactionalPosition<EveryBatch>");
}

TEST_CASE("the transactional-log section fails an attempt written after its committed copy") {
  const auto r =
      ct::run_conformance<zombie_fixture>("zombie writes", only(false, false, true, false));
  expect_failed(r, log_section, "after the record's committed copy");
  // Counted per record, nothing is lost or twice: only the section sees the zombie.
  expect_passed(r, "crash matrix TransactionalPosition<EveryBatch>");
}

TEST_CASE("the transactional-log section fails views in key order rather than log order") {
  const auto r = ct::run_conformance<key_ordered_fixture>("views in key order",
                                                          only(false, false, true, false));
  expect_failed(r, log_section, "out of order");
  // Counted per record, the rows are all there: only the section sees the order.
  expect_passed(r, "crash matrix TransactionalPosition<EveryBatch>");
}

// ---- the adversarial tier ------------------------------------------------------------------

namespace {

using conformance::hostile_event;

/// Collapses a unit to one row per key before writing it, keeping the key's *first* row: one
/// record per unit is right, and any unit in which a key repeats leaves an older row (the class
/// of issue 21, items 8 and 9: a unit's effect is not that of its records in offset order).
class collapsing_sink {
 public:
  using row_type = hostile_event;
  using key_type = co::key<&hostile_event::id>;
  using capabilities = co::capabilities<co::Idempotent, co::Transactional, co::Volatile>;

  void begin() { pending_.clear(); }
  co::write_outcome apply(co::offset o, const hostile_event& e) {
    pending_.push_back({o, e});
    return co::write_outcome::applied;
  }
  void store_position(co::position p) { staged_ = p; }
  [[nodiscard]] std::optional<co::position> load_position() const { return position_; }
  void commit() {
    std::vector<std::int64_t> seen;
    for (const auto& [o, e] : pending_) {
      if (std::find(seen.begin(), seen.end(), e.id) != seen.end())
        continue;  // the defect: a later row of the same key is dropped
      seen.push_back(e.id);
      const std::int64_t id = e.id;  // (clang 14 cannot capture a structured binding)
      rows_.erase(std::remove_if(rows_.begin(), rows_.end(),
                                 [&](const auto& r) { return r.second.id == id; }),
                  rows_.end());
      rows_.emplace_back(o, e);
    }
    pending_.clear();
    if (staged_)
      position_ = staged_;
    staged_.reset();
  }
  void rollback() {
    pending_.clear();
    staged_.reset();
  }
  [[nodiscard]] const std::vector<std::pair<co::offset, hostile_event>>& rows() const {
    return rows_;
  }

 private:
  std::vector<std::pair<co::offset, hostile_event>> pending_;
  std::vector<std::pair<co::offset, hostile_event>> rows_;
  std::optional<co::position> staged_;
  std::optional<co::position> position_;
};

/// A position store that two consumers share whatever they are: one per process, no binding.
co::memory::position_store<>& shared_store() {
  static co::memory::position_store<> s;
  return s;
}

template <class Sink>
class adversarial_fixture {
 public:
  using event_type = hostile_event;
  using source_type = co::memory::log<hostile_event>;
  using sink_type = Sink;
  using store_type = co::memory::position_store<>;

  adversarial_fixture() { shared_store() = co::memory::position_store<>(); }
  explicit adversarial_fixture(adversarial_fixture<collapsing_sink>&) {}

  static hostile_event make_event(std::int64_t key, std::int64_t seq) {
    return conformance::plain_hostile(key, seq);
  }
  static std::vector<hostile_event> hostile_events() { return conformance::hostile_values(); }
  static bool same_row(const hostile_event& a, const hostile_event& b) {
    return conformance::same_hostile(a, b);
  }
  static bool same_key(const hostile_event& a, const hostile_event& b) { return a.id == b.id; }
  void create_log(std::span<const hostile_event> events) {
    for (const auto& e : events)
      log_.append(e);
  }
  source_type& source() { return log_; }
  sink_type& sink() { return sink_; }
  store_type& store() { return shared_store(); }
  void close() {}
  std::vector<ct::observed_row<hostile_event>> rows() {
    std::vector<ct::observed_row<hostile_event>> out;
    for (const auto& [o, e] : sink_.rows())
      out.push_back({e.id, o, e});
    return out;
  }

 private:
  source_type log_;
  sink_type sink_;
};

/// Keeps nothing: the same (no rows) at every unit size.
class silent_sink {
 public:
  using row_type = hostile_event;
  using key_type = co::key<&hostile_event::id>;
  using capabilities = co::capabilities<co::Idempotent, co::Transactional, co::Volatile>;

  void begin() {}
  co::write_outcome apply(co::offset, const hostile_event&) { return co::write_outcome::applied; }
  void store_position(co::position p) { position_ = p; }
  [[nodiscard]] std::optional<co::position> load_position() const { return position_; }
  void commit() {}
  void rollback() {}
  [[nodiscard]] std::vector<std::pair<co::offset, hostile_event>> rows() const { return {}; }

 private:
  std::optional<co::position> position_;
};

/// Owned properties over an opener that throws whatever it is given.
class refusing_opener_fixture : public adversarial_fixture<collapsing_sink> {
 public:
  static std::vector<std::pair<std::string, std::string>> owned_properties() {
    return {{"auto.offset.reset", "earliest"}};
  }
  static std::pair<std::string, std::string> accepted_property() { return {"client.id", "kit"}; }
  void open_source_with(const std::string& name, const std::string&) {
    throw std::runtime_error("not implemented: " + name);
  }
};

/// The same, with a sibling consumer whose store is the first one's (an unbound shared store).
class sharing_fixture : public adversarial_fixture<collapsing_sink> {
 public:
  using sibling_type = adversarial_fixture<collapsing_sink>;
};

}  // namespace

TEST_CASE("the adversarial tier fails a sink that collapses a unit by key") {
  const auto r = ct::run_adversarial<adversarial_fixture<collapsing_sink>>("collapsing sink");
  const std::string check = "apply order: any unit size leaves what one record per unit leaves";
  // Each hostile value follows an ordinary record of its key: a unit holding both keeps the
  // ordinary one.
  expect_failed(r, check,
                "AtLeastOnce<EveryBatch>, units of 2: the sink holds the rows of {0, 2, 4, 6, 8, "
                "10, 12, 14, 16, 18}, one record per unit those of {1, 3, 5, 7, 9, 11, 13, 15, "
                "17, 19}",
                40);
  CHECK(r.failures() == 38);  // units of 2 to 20 under each of the two legal policies
  // One record per unit has nothing to collapse: those scenarios pass.
  const auto* c = r.find(check);
  REQUIRE(c != nullptr);
  for (const auto& f : c->failures)
    CHECK(f.find("one record per unit:") == std::string::npos);
  // TransactionalPosition is not legal over a sink without an offset guard: said, not hidden.
  CHECK(std::find(r.not_run.begin(), r.not_run.end(),
                  "apply order under TransactionalPosition<EveryBatch>: not legal over the "
                  "fixture's parts") != r.not_run.end());
}

TEST_CASE("the adversarial tier fails a sink that writes the same thing at every unit size") {
  // Writes nothing, whatever the unit: every run agrees with every other, so only the rows one
  // record per unit must leave (the fixture's same_key) can tell.
  const auto r = ct::run_adversarial<adversarial_fixture<silent_sink>>("silent sink");
  expect_failed(r, "apply order: any unit size leaves what one record per unit leaves",
                "AtLeastOnce<EveryBatch>, one record per unit: the sink holds the rows of {}, "
                "applying the records not dead-lettered in offset order leaves {1, 3, 5, 7, 9, "
                "11, 13, 15, 17, 19} (the last record of each key)");
  CHECK(r.failures() == 2);  // one record per unit, under each legal policy
}

TEST_CASE("the adversarial tier fails an opener that refuses every property") {
  const auto r = ct::run_adversarial<refusing_opener_fixture>("an opener that always throws");
  expect_failed(r, "owned properties: every spelling and scope is refused",
                "control: client.id=kit: refused a property the library does not decide");
  const auto* c = r.find("owned properties: every spelling and scope is refused");
  REQUIRE(c != nullptr);
  CHECK(c->failures.size() == 1);  // the control; the refusals themselves prove nothing
}

TEST_CASE("the adversarial tier fails two consumers that share one position") {
  const auto r = ct::run_adversarial<sharing_fixture>("two consumers, one unbound store");
  expect_failed(r, "shared storage: two consumers with default options on one store",
                "it started from the first consumer's position");
  // Nothing else is claimed: the fixture offers no owned properties.
  CHECK(std::find(r.not_run.begin(), r.not_run.end(),
                  "owned properties: the fixture has no owned_properties()") != r.not_run.end());
}
