// SPDX-License-Identifier: BSL-1.0
// The conformance fixture of the PostgreSQL adapter: one of its sinks (guarded upsert,
// version-guarded, upsert, append) and its position store, against the throwaway server the
// PostgreSQL tests start (tests/postgres: the CTest fixture `postgres`; pg_support.hpp reads its
// connection string). Each scenario gets a schema to itself, emptied before it starts: its
// storage (see schema_pool below).
//
// `Sink` must run on the server it is given: the fsync=off server gives `postgres::buffered`
// only (a `synced` type is refused at connect, durability_mismatch). The crash matrix and the
// random schedules simulate crashes of the consumer's process, which a server keeps whatever
// its fsync says. The source is a memory::log declared as durable as the sink (rule R9c asks
// that much of a source): a stand-in that only feeds the sink, whose own capabilities the kit
// does not check.

#pragma once

#include <libpq-fe.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/kit_event.hpp"
#include "postgres/pg_support.hpp"

namespace conformance {

namespace co = commit_order;
namespace pg = commit_order::postgres;

/// The table the PostgreSQL sinks write: keyed on `k` (the append sink has no key constraint);
/// `seq` is the version of the version-guarded sink (the kit's events number each key's events
/// 0, 1, 2, ... in log order, so on them the version guard and the offset guard agree).
struct kit_pg_rows final
    : pg::table_layout<"kit_rows", kit_event, pg::key_columns<pg::column<"k", &kit_event::key>>,
                       pg::value_columns<pg::column<"seq", &kit_event::seq>>> {};

template <class Durability = pg::buffered>
using pg_guarded_sink = pg::guarded_upsert_sink<kit_pg_rows, Durability>;
template <class Durability = pg::buffered>
using pg_version_sink = pg::version_guarded_sink<kit_pg_rows, &kit_event::seq, Durability>;
template <class Durability = pg::buffered>
using pg_upsert_sink = pg::upsert_sink<kit_pg_rows, Durability>;
template <class Durability = pg::buffered>
using pg_append_sink = pg::append_sink<kit_pg_rows, Durability>;

/// Closes a connection as a killed process leaves it: the socket is shut before libpq's
/// goodbye (Terminate) and before any ROLLBACK, so the server finds the client gone and
/// discards an open transaction on its own, as it does after a SIGKILL.
inline void close_like_a_kill(pg::connection& db) {
  if (PGconn* c = db.get(); c != nullptr) {
    if (const int fd = PQsocket(c); fd >= 0)
      ::shutdown(fd, SHUT_RDWR);
  }
  db.drop();
}

template <class Sink, class StoreDurability = pg::buffered>
class postgres_fixture {
 public:
  using event_type = kit_event;
  using source_type = co::memory::log<kit_event, co::declared_durability_t<Sink, co::Volatile>>;
  using sink_type = Sink;
  using store_type = pg::position_store<StoreDurability>;
  static constexpr bool source_is_stand_in = true;

  /// Fresh storage: an empty schema of the pool (below).
  postgres_fixture() : schema_(pool().acquire()) {}
  postgres_fixture(const postgres_fixture&) = delete;
  postgres_fixture& operator=(const postgres_fixture&) = delete;
  ~postgres_fixture() {
    close();
    pool().release(schema_);
  }

  static kit_event make_event(std::int64_t key, std::int64_t seq) { return kit_event{key, seq}; }

  void create_log(std::span<const kit_event> events) {
    for (const auto& e : events)
      log_.append(e);
  }
  source_type& source() { return log_; }
  sink_type& sink() {
    if (!sink_)
      sink_.emplace(pg_test::conninfo(), sink_options(schema_));
    return *sink_;
  }
  /// The store keeps its positions under a stream of its own: its rows are never the ones the
  /// sink claims (a claimed row would fence the store, which writes as owner epoch 0).
  store_type& store() {
    if (!store_)
      store_.emplace(pg_test::conninfo(), store_options(schema_));
    return *store_;
  }
  /// The process's death: both connections go without a COMMIT or a ROLLBACK (an open
  /// transaction is the server's to discard); what the server committed stays.
  void close() {
    if (sink_)
      close_like_a_kill(sink_->database());
    if (store_)
      close_like_a_kill(store_->database());
    sink_.reset();  // its destructor's rollback finds no connection, and sends nothing
    store_.reset();
  }
  void truncate_before(co::position p) { log_.truncate_before(p); }

  /// The committed rows, read on the observer's connection (not the sink's: reading must not
  /// reopen a sink the kit closed, nor see a transaction it left open).
  std::vector<co::testing::observed_row<kit_event>> rows() {
    std::vector<co::testing::observed_row<kit_event>> out;
    const pg::result r = pool().observer.exec("SELECT k, seq, source_offset FROM \"" + schema_ +
                                              "\".kit_rows ORDER BY source_offset, k");
    for (int i = 0; i < r.rows(); ++i) {
      const kit_event e{r.integer(i, 0), r.integer(i, 1)};
      out.push_back({e.key, co::offset{r.integer(i, 2)}, e});
    }
    return out;
  }

 private:
  static pg::sink_options sink_options(const std::string& schema) {
    pg::sink_options o;
    o.schema = schema;
    o.stream = "conformance";
    return o;
  }
  static pg::store_options store_options(const std::string& schema) {
    pg::store_options o;
    o.schema = schema;
    o.stream = "conformance_store";
    return o;
  }

  /// The schemas of one test process, and a connection for what is not the consumer's
  /// (clearing a schema, reading its rows back). The kit opens a fresh storage per scenario,
  /// hundreds per sink: creating a schema with its tables and dropping it again took 12 ms a
  /// scenario more than emptying them (a third of a scenario's time, measured here). So a schema is
  /// made once (its tables by the sink and the store themselves, as at a consumer's first start),
  /// emptied before every scenario that takes it, and dropped when the process ends. Empty
  /// tables are all a fresh storage is: the positions and the rows are in them, nothing else.
  struct schema_pool {
    pg_test::client observer{pg_test::conninfo()};
    std::vector<std::string> free;
    std::vector<std::string> all;

    schema_pool() = default;
    schema_pool(const schema_pool&) = delete;
    schema_pool& operator=(const schema_pool&) = delete;
    ~schema_pool() {
      for (const auto& s : all) {
        try {
          observer.exec("DROP SCHEMA \"" + s + "\" CASCADE");
        } catch (...) {
          // Left to the throwaway server, which goes with everything in it.
        }
      }
    }

    std::string acquire() {
      if (free.empty())
        return make();
      std::string s = std::move(free.back());
      free.pop_back();
      // A killed connection of the scenario before may still be ending on the server: its
      // transaction is rolled back first, and these wait for its locks.
      observer.exec("DELETE FROM \"" + s + "\".kit_rows; DELETE FROM \"" + s +
                    "\".commit_order_positions; DELETE FROM \"" + s + "\".commit_order_streams");
      return s;
    }
    void release(std::string s) { free.push_back(std::move(s)); }

   private:
    /// Unique on the server: the test cases run as separate processes, possibly at once.
    std::string make() {
      std::string s = "kit_" + std::to_string(::getpid()) + "_" + std::to_string(all.size());
      observer.exec("DROP SCHEMA IF EXISTS \"" + s + "\" CASCADE; CREATE SCHEMA \"" + s + "\"");
      all.push_back(s);
      {
        sink_type sink(pg_test::conninfo(), sink_options(s));
        store_type store(pg_test::conninfo(), store_options(s));
      }
      return s;
    }
  };
  static schema_pool& pool() {
    static schema_pool p;
    return p;
  }

  std::string schema_;
  source_type log_;
  std::optional<sink_type> sink_;
  std::optional<store_type> store_;
};

}  // namespace conformance
