// SPDX-License-Identifier: BSL-1.0
// A SQLite failure is the record's or the world's, never confused: SQLITE_BUSY, an interrupt or
// a failed ROLLBACK never dead-letters a healthy record nor moves the position; a row that
// violates a CHECK constraint is the record's failure and is dead-lettered. And ROLLBACK's
// result is checked.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace co = commit_order;
namespace sq = commit_order::sqlite;
using crash_lab::order_event;
using crash_lab::orders_flat;
using test_support::scratch_dir;

// ---- the split, by result code -------------------------------------------------------------

static_assert(sq::is_record_failure(SQLITE_CONSTRAINT_CHECK));
static_assert(sq::is_record_failure(SQLITE_CONSTRAINT_NOTNULL));
static_assert(sq::is_record_failure(SQLITE_CONSTRAINT_UNIQUE));
static_assert(sq::is_record_failure(SQLITE_CONSTRAINT_FOREIGNKEY));
static_assert(sq::is_record_failure(SQLITE_CONSTRAINT_TRIGGER));
static_assert(sq::is_record_failure(SQLITE_MISMATCH));
static_assert(sq::is_record_failure(SQLITE_TOOBIG));
static_assert(!sq::is_record_failure(SQLITE_CONSTRAINT_COMMITHOOK));
static_assert(!sq::is_record_failure(SQLITE_BUSY));
static_assert(!sq::is_record_failure(SQLITE_BUSY_SNAPSHOT));
static_assert(!sq::is_record_failure(SQLITE_LOCKED));
static_assert(!sq::is_record_failure(SQLITE_FULL));
static_assert(!sq::is_record_failure(SQLITE_IOERR_FSYNC));
static_assert(!sq::is_record_failure(SQLITE_IOERR_WRITE));
static_assert(!sq::is_record_failure(SQLITE_CORRUPT));
static_assert(!sq::is_record_failure(SQLITE_NOMEM));
static_assert(!sq::is_record_failure(SQLITE_READONLY));
static_assert(!sq::is_record_failure(SQLITE_CANTOPEN));
static_assert(!sq::is_record_failure(SQLITE_NOTADB));
static_assert(!sq::is_record_failure(SQLITE_PROTOCOL));
static_assert(!sq::is_record_failure(SQLITE_INTERRUPT));
static_assert(!sq::is_record_failure(SQLITE_RANGE));
static_assert(!sq::is_record_failure(SQLITE_ERROR));
static_assert(!sq::is_record_failure(SQLITE_MISUSE));
// The types the pipeline tells apart.
static_assert(std::is_base_of_v<co::infrastructure_error, sq::infrastructure_error>);
static_assert(std::is_base_of_v<co::rollback_failed, sq::rollback_error>);
static_assert(std::is_base_of_v<co::infrastructure_error, sq::durability_mismatch>);
static_assert(!std::is_base_of_v<co::infrastructure_error, sq::record_error>);
// One classified base for both SQL adapters (adapters/classified.hpp).
static_assert(std::is_base_of_v<co::adapters::classified_failure, sq::infrastructure_error>);
static_assert(std::is_base_of_v<co::adapters::classified_failure, sq::record_error>);
static_assert(std::is_base_of_v<co::adapters::classified_failure, sq::rollback_error>);
// A user's error derived from the adapter's, as before the shared base.
struct users_error : sq::infrastructure_error {
  using infrastructure_error::infrastructure_error;
};
static_assert(std::is_constructible_v<users_error, int, std::string_view>);
static_assert(std::is_constructible_v<sq::record_error, int, std::string_view>);

namespace {

// A payment with a free-text note: a TEXT column, bound without a copy.
struct payment {
  std::int64_t id = 0;
  std::int64_t amount = 0;
  std::string note;
};

struct payments final
    : sq::table_layout<"payments", payment, sq::key_columns<sq::column<"id", &payment::id>>,
                       sq::value_columns<sq::column<"amount", &payment::amount>,
                                         sq::column<"note", &payment::note>>> {};

using payment_sink = sq::guarded_upsert_sink<payments>;
using payment_log = co::memory::log<payment, co::Synced>;
// The in-memory dead letters stand in for a durable one (R12 asks for one at least as durable
// as the sink): these tests are about which records reach it, not about power cuts.
template <class Event>
using letters_t = co::memory::dead_letters<Event, co::Synced>;

// The schema the sink expects, plus a rule of the business: no negative amount.
void create_payments_with_check(const std::filesystem::path& file) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(file.string().c_str(), &db) == SQLITE_OK);
  const int rc = sqlite3_exec(db,
                              "CREATE TABLE payments (id INTEGER NOT NULL, amount INTEGER NOT NULL"
                              " CHECK (amount >= 0), note TEXT NOT NULL, source_offset INTEGER NOT"
                              " NULL, source_partition INTEGER NOT NULL, PRIMARY KEY (id))",
                              nullptr, nullptr, nullptr);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

std::vector<payment> payments_in(sq::connection& db) {
  auto q = db.prepare("SELECT id, amount, note FROM payments ORDER BY id");
  std::vector<payment> out;
  while (q.step())
    out.push_back(payment{q.column_int64(0), q.column_int64(1), q.column_text(2)});
  return out;
}

payment_log six_payments_one_negative() {
  payment_log log;
  for (std::int64_t i = 0; i < 6; ++i)
    log.append(
        payment{i, i == 3 ? -5 : 100 * i, std::string("payment ").append(std::to_string(i))});
  return log;
}

std::int64_t count_rows(sq::connection& db, std::string_view table) {
  auto q = db.prepare(std::string("SELECT count(*) FROM ").append(table));
  REQUIRE(q.step());
  return q.column_int64(0);
}

// A second connection (another process, as far as SQLite can tell) that holds the write lock.
class write_lock_holder final {
 public:
  explicit write_lock_holder(const std::filesystem::path& file) {
    REQUIRE(sqlite3_open(file.string().c_str(), &db_) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  write_lock_holder(const write_lock_holder&) = delete;
  write_lock_holder& operator=(const write_lock_holder&) = delete;
  ~write_lock_holder() {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST_CASE("a SQLite error says whose fault it is, and agrees with its type") {
  // blame() is world exactly for an infrastructure_error, the only thing the loop looks at:
  // for every code the classification knows, and for each kind thrown by raise().
  for (const int code : {SQLITE_CONSTRAINT_CHECK, SQLITE_CONSTRAINT_UNIQUE, SQLITE_MISMATCH,
                         SQLITE_TOOBIG, SQLITE_CONSTRAINT_COMMITHOOK, SQLITE_BUSY,
                         SQLITE_IOERR_FSYNC, SQLITE_FULL, SQLITE_ERROR, SQLITE_RANGE}) {
    try {
      sq::detail::raise(code, "the statement");
    } catch (const co::adapters::classified_failure& f) {
      const auto* e = dynamic_cast<const co::error*>(&f);
      REQUIRE(e != nullptr);
      const bool world = dynamic_cast<const co::infrastructure_error*>(e) != nullptr;
      CHECK(world == (f.blame() == co::adapters::fault::world));
      CHECK(world == !sq::is_record_failure(code));
      CHECK(std::string_view(e->what()).starts_with("commit_order::sqlite: the statement"));
      CHECK(dynamic_cast<const sq::result_code&>(f).code() == code);
    }
  }
  const sq::rollback_error rollback(SQLITE_BUSY, "busy");
  CHECK(rollback.blame() == co::adapters::fault::world);
}

int code_of(const std::exception& e) {
  const auto* c = dynamic_cast<const sq::result_code*>(&e);
  return c != nullptr ? c->code() : -1;
}

// Denies ROLLBACK (an authorizer is consulted when a statement is prepared, and setting one
// expires every prepared statement, so the sink's ROLLBACK is prepared again and refused).
int deny_rollback(void*, int action, const char* what, const char*, const char*, const char*) {
  return action == SQLITE_TRANSACTION && what != nullptr && std::string_view(what) == "ROLLBACK"
             ? SQLITE_DENY
             : SQLITE_OK;
}

}  // namespace

// ---- the record's failure ------------------------------------------------------------------

TEST_CASE("a CHECK violation is the record's failure: dead-lettered, the rest written") {
  scratch_dir dir;
  create_payments_with_check(dir / "db.sqlite");
  payment_log log = six_payments_one_negative();
  payment_sink sink(dir / "db.sqlite");
  letters_t<payment> letters;

  SUBCASE("the error the sink throws") {
    try {
      sink.apply(co::partition_id{0}, co::offset{0}, payment{1, -1, "refused"});
      FAIL("a negative amount was written");
    } catch (const co::infrastructure_error&) {
      FAIL("a CHECK violation was typed as the world's failure");
    } catch (const sq::record_error& e) {
      CHECK(e.code() == SQLITE_CONSTRAINT_CHECK);
      CHECK(e.primary_code() == SQLITE_CONSTRAINT);
      CHECK(std::string(e.what()).find("CHECK constraint failed") != std::string::npos);
    }
    // The statement is usable for the next row.
    CHECK(sink.apply(co::partition_id{0}, co::offset{1}, payment{1, 1, "fine"}) ==
          co::write_outcome::applied);
  }
  SUBCASE("TransactionalPosition with dead_letter<1>") {
    co::pipeline<payment_log, payment_sink, co::TransactionalPosition<>,
                 co::with_error_handling<co::dead_letter<1>>,
                 co::with_dead_letters<letters_t<payment>>>
        p(log, sink, letters, co::settings{.batch_size = 4});
    CHECK(p.run() == 6);
    REQUIRE(letters.letters().size() == 1);
    CHECK(letters.letters().front().source_offset == co::offset{3});
    CHECK(std::string(letters.letters().front().reason).find("CHECK constraint failed") !=
          std::string::npos);
    CHECK(sink.load_position() == co::position{6});
    const auto rows = payments_in(sink.database());
    REQUIRE(rows.size() == 5);
    for (const auto& r : rows)
      CHECK(r.id != 3);
  }
  SUBCASE("AtLeastOnce with dead_letter<0> and the SQLite position store") {
    sq::position_store<> store(dir / "db.sqlite");
    co::pipeline<payment_log, payment_sink, co::AtLeastOnce<>, co::with_store<sq::position_store<>>,
                 co::with_error_handling<co::dead_letter<>>,
                 co::with_dead_letters<letters_t<payment>>>
        p(log, sink, store, letters, co::settings{.batch_size = 4});
    CHECK(p.run() == 6);
    REQUIRE(letters.letters().size() == 1);
    CHECK(letters.letters().front().source_offset == co::offset{3});
    CHECK(store.load() == co::position{6});
    CHECK(payments_in(sink.database()).size() == 5);
  }
}

TEST_CASE("a string over SQLite's length limit is the record's failure (SQLITE_TOOBIG)") {
  scratch_dir dir;
  payment_sink sink(dir / "db.sqlite");
  sqlite3_limit(sink.database().get(), SQLITE_LIMIT_LENGTH, 64);
  CHECK_THROWS_AS(
      sink.apply(co::partition_id{0}, co::offset{0}, payment{1, 1, std::string(100, 'x')}),
      sq::record_error);
  try {
    sink.apply(co::partition_id{0}, co::offset{0}, payment{1, 1, std::string(100, 'x')});
  } catch (const sq::record_error& e) {
    CHECK(e.primary_code() == SQLITE_TOOBIG);
  }
  CHECK(sink.apply(co::partition_id{0}, co::offset{1}, payment{1, 1, "short"}) ==
        co::write_outcome::applied);
}

TEST_CASE("text is bound without a copy, and every row binds it again") {
  // The bindings are not cleared after a row (a cost per row); each row's strings are bound
  // before its step, so no row reads another's -- or a string that no longer exists (ASan).
  scratch_dir dir;
  payment_sink sink(dir / "db.sqlite");
  for (std::int64_t i = 0; i < 20; ++i) {
    auto p = std::make_unique<payment>(payment{i, i, std::string(40 + i, 'a' + i % 26)});
    sink.apply(co::partition_id{0}, co::offset{i}, *p);
  }  // each payment, and its note, is freed before the next row
  const auto rows = payments_in(sink.database());
  REQUIRE(rows.size() == 20);
  for (std::int64_t i = 0; i < 20; ++i)
    CHECK(rows[static_cast<std::size_t>(i)].note ==
          std::string(static_cast<std::size_t>(40 + i), static_cast<char>('a' + i % 26)));
}

// ---- the world's failure -------------------------------------------------------------------

TEST_CASE("SQLITE_BUSY is the world's failure: nothing dead-lettered, the position unmoved") {
  scratch_dir dir;
  co::memory::log<order_event, co::Synced> log;
  for (std::int64_t i = 0; i < 6; ++i)
    log.append(order_event{i, 1, i, 1});
  using sink_t = sq::guarded_upsert_sink<orders_flat>;
  sink_t sink(dir / "db.sqlite", sq::sink_options{.busy_timeout = std::chrono::milliseconds{20}});
  letters_t<order_event> letters;

  SUBCASE("AtLeastOnce: the write itself is busy") {
    // The position lives elsewhere, so only the sink's database is locked.
    sq::position_store<> store(dir / "position.sqlite");
    co::pipeline<co::memory::log<order_event, co::Synced>, sink_t, co::AtLeastOnce<>,
                 co::with_store<sq::position_store<>>, co::with_error_handling<co::dead_letter<2>>,
                 co::with_dead_letters<letters_t<order_event>>>
        p(log, sink, store, letters, co::settings{.batch_size = 3});
    CHECK(p.poll_once() == 3);
    {
      write_lock_holder other(dir / "db.sqlite");
      try {
        p.poll_once();
        FAIL("a write into a locked database succeeded");
      } catch (const co::infrastructure_error& e) {
        CHECK(code_of(e) == SQLITE_BUSY);
      }
      CHECK(letters.letters().empty());
      CHECK(store.load() == co::position{3});
    }
    // The lock is gone: the unit is redone and nothing is missing.
    CHECK(p.run() == 3);
    CHECK(letters.letters().empty());
    CHECK(store.load() == co::position{6});
    CHECK(count_rows(sink.database(), "orders_flat") == 6);
  }
  SUBCASE("TransactionalPosition: BEGIN IMMEDIATE is busy") {
    co::pipeline<co::memory::log<order_event, co::Synced>, sink_t, co::TransactionalPosition<>,
                 co::with_error_handling<co::dead_letter<2>>,
                 co::with_dead_letters<letters_t<order_event>>>
        p(log, sink, letters, co::settings{.batch_size = 3});
    CHECK(p.poll_once() == 3);
    {
      write_lock_holder other(dir / "db.sqlite");
      try {
        p.poll_once();
        FAIL("a transaction began in a locked database");
      } catch (const co::infrastructure_error& e) {
        CHECK(code_of(e) == SQLITE_BUSY);
      }
      CHECK(letters.letters().empty());
      CHECK(sink.load_position() == co::position{3});
    }
    CHECK(p.run() == 3);
    CHECK(letters.letters().empty());
    CHECK(sink.load_position() == co::position{6});
  }
}

namespace {
// Interrupts (sqlite3_progress_handler) the first instruction SQLite runs inside a transaction
// once armed, then disarms itself.
class interrupter final {
 public:
  explicit interrupter(sqlite3* db) : db_(db) {
    sqlite3_progress_handler(db_, 1, &on_progress, this);
  }
  interrupter(const interrupter&) = delete;
  interrupter& operator=(const interrupter&) = delete;
  ~interrupter() { sqlite3_progress_handler(db_, 0, nullptr, nullptr); }
  void arm() noexcept { armed_ = true; }

 private:
  static int on_progress(void* self) {
    auto* i = static_cast<interrupter*>(self);
    if (i->armed_ && sqlite3_get_autocommit(i->db_) == 0) {
      i->armed_ = false;
      return 1;
    }
    return 0;
  }
  sqlite3* db_;
  bool armed_ = false;
};

// A guarded upsert sink whose write of one offset is interrupted, once.
struct interrupted_sink : sq::guarded_upsert_sink<orders_flat> {
  using sq::guarded_upsert_sink<orders_flat>::guarded_upsert_sink;
  interrupter* irq = nullptr;
  std::int64_t at = -1;
  co::write_outcome apply(co::offset o, const order_event& e) {
    if (o.value() == at) {
      at = -1;
      irq->arm();
    }
    return sq::guarded_upsert_sink<orders_flat>::apply(co::partition_id{0}, o, e);
  }
};
}  // namespace

TEST_CASE("an interrupted write: SQLite ended the transaction, the sink stays usable") {
  // An interrupt (as a full disk or an I/O error) makes SQLite roll the whole transaction back
  // itself; rollback() then has nothing to undo and must not fail, nor leave the sink unusable.
  scratch_dir dir;
  co::memory::log<order_event, co::Synced> log;
  for (std::int64_t i = 0; i < 6; ++i)
    log.append(order_event{i, 1, i, 1});
  interrupted_sink sink(dir / "db.sqlite");
  interrupter irq(sink.database().get());
  sink.irq = &irq;

  SUBCASE("called by hand") {
    sink.begin();
    sink.apply(co::offset{0}, order_event{0, 1, 0, 1});
    irq.arm();
    try {
      sink.apply(co::offset{1}, order_event{1, 1, 1, 1});
      FAIL("the interrupt did not surface");
    } catch (const co::infrastructure_error& e) {
      CHECK(code_of(e) == SQLITE_INTERRUPT);
    }
    CHECK_FALSE(sink.database().in_transaction());  // SQLite rolled back
    CHECK_NOTHROW(sink.rollback());
    CHECK(sink.usable());
    CHECK(count_rows(sink.database(), "orders_flat") == 0);
    sink.begin();
    sink.apply(co::offset{0}, order_event{0, 1, 0, 1});
    sink.commit();
    CHECK(count_rows(sink.database(), "orders_flat") == 1);
  }
  SUBCASE("through the pipeline, under dead_letter<1>") {
    letters_t<order_event> letters;
    co::pipeline<co::memory::log<order_event, co::Synced>, interrupted_sink,
                 co::TransactionalPosition<>, co::with_error_handling<co::dead_letter<1>>,
                 co::with_dead_letters<letters_t<order_event>>>
        p(log, sink, letters, co::settings{.batch_size = 3});
    sink.at = 1;
    try {
      p.poll_once();
      FAIL("the interrupt was retried or dead-lettered as the record's failure");
    } catch (const co::infrastructure_error& e) {
      CHECK(code_of(e) == SQLITE_INTERRUPT);
    }
    CHECK(letters.letters().empty());
    CHECK_FALSE(sink.load_position().has_value());
    CHECK(p.run() == 6);
    CHECK(letters.letters().empty());
    CHECK(sink.load_position() == co::position{6});
  }
  SUBCASE("BEGIN interrupted after it opened the transaction leaves none open") {
    // SQLite checks for an interrupt when a statement ends: BEGIN can fail with the
    // transaction already open. begin() must not leave it so (the next begin() would refuse).
    irq.arm();
    CHECK_THROWS_AS(sink.begin(), co::infrastructure_error);
    CHECK_FALSE(sink.database().in_transaction());
    CHECK(sink.usable());
    sink.begin();
    sink.apply(co::offset{0}, order_event{0, 1, 0, 1});
    sink.commit();
    CHECK(count_rows(sink.database(), "orders_flat") == 1);
  }
}

// ---- ROLLBACK ------------------------------------------------------------------------------

TEST_CASE("a ROLLBACK that fails with the transaction still open: typed, and the sink refuses") {
  scratch_dir dir;
  using sink_t = sq::guarded_upsert_sink<orders_flat>;
  {
    sink_t sink(dir / "db.sqlite");
    sink.begin();
    sink.apply(co::partition_id{0}, co::offset{0}, order_event{0, 1, 0, 1});
    sink.store_position(co::partition_id{0}, co::position{1});
    sqlite3_set_authorizer(sink.database().get(), &deny_rollback, nullptr);
    try {
      sink.rollback();
      FAIL("a ROLLBACK that did not run was reported as done");
    } catch (const co::rollback_failed& e) {
      CHECK(code_of(e) == SQLITE_AUTH);
      CHECK(std::string(e.what()).find("must be reopened") != std::string::npos);
    }
    CHECK(sink.database().in_transaction());
    CHECK_FALSE(sink.usable());
    // Anything written now would land in a transaction that never commits: refused.
    CHECK_THROWS_AS(sink.apply(co::partition_id{0}, co::offset{1}, order_event{1, 1, 1, 1}),
                    co::infrastructure_error);
    CHECK_THROWS_AS(sink.begin(), co::infrastructure_error);
    CHECK_THROWS_AS(sink.store_position(co::partition_id{0}, co::position{2}),
                    co::infrastructure_error);
    // Another connection never sees the transaction's row nor its position.
    sink_t other(dir / "db.sqlite");
    CHECK(count_rows(other.database(), "orders_flat") == 0);
    CHECK_FALSE(other.load_position().has_value());
  }  // destroying the sink closes the connection, which discards the transaction
  sink_t reopened(dir / "db.sqlite");
  CHECK(reopened.usable());
  CHECK(count_rows(reopened.database(), "orders_flat") == 0);
  CHECK_FALSE(reopened.load_position().has_value());
}

TEST_CASE("through the pipeline, a failed ROLLBACK is rollback_failed and no record is blamed") {
  scratch_dir dir;
  create_payments_with_check(dir / "db.sqlite");
  payment_log log = six_payments_one_negative();
  payment_sink sink(dir / "db.sqlite");
  co::pipeline<payment_log, payment_sink, co::TransactionalPosition<>,
               co::with_observer<co::counting_observer>>
      p(log, sink, co::settings{.batch_size = 6});
  sqlite3_set_authorizer(sink.database().get(), &deny_rollback, nullptr);
  bool nested_record_error = false;
  try {
    p.poll_once();  // offset 3 violates the CHECK; the rollback that follows is refused
    FAIL("the failed rollback was not reported");
  } catch (const co::rollback_failed& e) {
    try {
      std::rethrow_if_nested(e);
    } catch (const sq::record_error& original) {
      nested_record_error = original.code() == SQLITE_CONSTRAINT_CHECK;
    }
  }
  CHECK(nested_record_error);
  CHECK(p.observer().records_failed == 0);
  CHECK_FALSE(sink.usable());
  payment_sink other(dir / "db.sqlite");
  CHECK(payments_in(other.database()).empty());
  CHECK_FALSE(other.load_position().has_value());
}
