// SPDX-License-Identifier: BSL-1.0
// The cases of the PostgreSQL benchmark: TransactionalPosition at batch 1, 64 and 512, on a
// server with fsync=on (the sink `synced`) and one with fsync=off (`buffered`), through the
// library's pipeline and through the loop a careful engineer writes by hand with libpq.
//
// The hand-written twin does the same work the fastest way found here: per batch, the rows
// in the order the records came (no batch repeats a key), one `INSERT ... SELECT *
// FROM unnest($1::bigint[], ...)` upsert with the partition-scoped offset guard, the fence
// (`SELECT ... FOR UPDATE` on the position row) and the position update, all in one pipelined
// round trip, the results checked (the fence holds, the position changed one row, absorbed
// rows counted), then COMMIT. It sends the very statements the adapter sends -- the same SQL
// text, the same session settings, the same order -- which `postgres_bench --verify` checks
// through pg_stat_statements. (What was measured and rejected: one round trip per row; one
// multi-row VALUES statement per batch -- no faster than the arrays and limited to 65,535
// parameters; COMMIT queued behind the checks -- a zombie's rows would commit.)
//
// Every case starts from the same seeded schema: `orders` rows and the position row written
// before it runs, so every measured record updates an existing row with a newer offset.
#pragma once

#include <libpq-fe.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

#include "seeded_orders.hpp"

namespace postgres_bench {

namespace co = commit_order;
namespace pg = commit_order::postgres;

using bench_support::log_t;
using bench_support::order_event;
using bench_support::orders;
using bench_support::reader_t;

struct orders_flat final
    : pg::table_layout<"orders_flat", order_event,
                       pg::key_columns<pg::column<"order_id", &order_event::order_id>>,
                       pg::value_columns<pg::column<"customer_id", &order_event::customer_id>,
                                         pg::column<"total_cents", &order_event::total_cents>,
                                         pg::column<"event_seq", &order_event::event_seq>>> {};

/// Records a case consumes before its schema is rebuilt (a round).
inline constexpr std::int64_t round_records = std::int64_t{1} << 16;

/// The seeded records and one round after them (bench/seeded_orders.hpp).
inline const log_t& shared_log() {
  static const log_t log = bench_support::seeded_log(round_records);
  return log;
}

enum class server_id { fsync_on, fsync_off };
inline const char* name(server_id s) {
  return s == server_id::fsync_on ? "fsync_on" : "fsync_off";
}

/// A plain libpq connection that throws.
class admin final {
 public:
  explicit admin(const std::string& conninfo) : c_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(c_.get()) != CONNECTION_OK)
      throw std::runtime_error(PQerrorMessage(c_.get()));
    exec("SET client_min_messages = warning");
  }
  pg::result exec(const std::string& sql) {
    pg::result r(PQexec(c_.get(), sql.c_str()));
    if (!r.ok())
      throw std::runtime_error(sql + ": " + r.message());
    return r;
  }

 private:
  struct closer {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };
  std::unique_ptr<PGconn, closer> c_;
};

/// A fresh schema with the adapter's tables, `orders` seeded rows (offsets 0 .. orders-1) and
/// the position row at `orders`, owned by epoch 0.
inline void seed(const std::string& conninfo, const std::string& schema) {
  admin a(conninfo);
  a.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
  a.exec("CREATE SCHEMA " + schema);
  a.exec("SET search_path TO " + schema);
  a.exec(pg::detail::table_sql<orders_flat, pg::guarded_upsert_mode>::create());
  a.exec(
      "CREATE TABLE commit_order_positions (stream TEXT NOT NULL, topic TEXT NOT NULL,"
      " \"partition\" INTEGER NOT NULL, position BIGINT, owner_epoch BIGINT NOT NULL DEFAULT 0,"
      " bound_to TEXT, fingerprint BIGINT, fingerprint_position BIGINT, PRIMARY KEY (stream, "
      "topic, \"partition\"));"
      " CREATE TABLE commit_order_streams (stream TEXT NOT NULL, topic TEXT NOT NULL, era BIGINT"
      " NOT NULL DEFAULT 0, partition_count INTEGER, PRIMARY KEY (stream, topic))");
  a.exec("INSERT INTO orders_flat SELECT i, 100 + i % 97, i, 1, 0, i FROM generate_series(0, " +
         std::to_string(orders - 1) + ") AS i");
  a.exec("INSERT INTO commit_order_positions VALUES ('orders', 'default', 0, " +
         std::to_string(orders) + ", 0)");
  a.exec("VACUUM ANALYZE orders_flat");
}

inline pg::sink_options sink_options(const std::string& schema) {
  pg::sink_options o;
  o.schema = schema;
  o.stream = "orders";
  o.create_tables = false;
  return o;
}

// ---- the library -----------------------------------------------------------------------------

template <class Durability>
class pipeline_case final {
 public:
  using sink_t = pg::guarded_upsert_sink<orders_flat, Durability>;

  pipeline_case(const std::string& conninfo, const std::string& schema, std::size_t batch)
      : reader_(shared_log().make_reader())
      , sink_(conninfo, sink_options(schema))
      , pipeline_(reader_, sink_, co::settings{.batch_size = batch}) {
    pipeline_.recover();
  }

  /// One batch; 0 at the end of the round.
  std::size_t step() { return pipeline_.poll_once(); }
  [[nodiscard]] const pg::sink_stats& stats() const { return sink_.stats(); }

 private:
  reader_t reader_;
  sink_t sink_;
  co::pipeline<reader_t, sink_t, co::TransactionalPosition<>> pipeline_;
};

// ---- the hand-written twin -------------------------------------------------------------------

/// The same work with libpq, written out: see the top of this file.
template <class Durability>
class handwritten_case final {
 public:
  handwritten_case(const std::string& conninfo, const std::string& schema, std::size_t batch)
      : batch_(batch), conn_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(conn_.get()) != CONNECTION_OK)
      throw std::runtime_error(PQerrorMessage(conn_.get()));
    // The adapter's session: synchronous commits, READ COMMITTED, bounded lock waits.
    exec(
        "SET synchronous_commit = on; SET default_transaction_isolation = 'read committed';"
        " SET client_min_messages = warning; SET lock_timeout = 10000;"
        " SET idle_in_transaction_session_timeout = 60000; SET search_path TO \"" +
        schema + "\";");
    const pg::result d = exec(
        "SELECT current_setting('synchronous_commit'), current_setting('fsync'),"
        " current_setting('full_page_writes')");
    if (Durability::needs_fsync && (d.text(0, 1) != "on" || d.text(0, 2) != "on"))
      throw std::runtime_error("the server does not run with fsync=on");
    prepare("co_position_fence",
            "SELECT \"partition\", owner_epoch FROM \"commit_order_positions\" WHERE stream = $1 "
            "AND topic = $2 AND \"partition\" = ANY($3::integer[]) ORDER BY \"partition\" FOR "
            "UPDATE");
    prepare("co_position_store",
            "INSERT INTO \"commit_order_positions\" AS t (stream, topic, \"partition\", "
            "position, owner_epoch, fingerprint, fingerprint_position) SELECT $1, $2, u.k, u.p, "
            "u.e, u.f, u.p FROM unnest($3::integer[], $4::bigint[], $5::bigint[], $6::bigint[]) "
            "AS u(k, p, e, f) ON CONFLICT (stream, topic, \"partition\") DO UPDATE SET position = "
            "excluded.position, fingerprint = excluded.fingerprint, fingerprint_position = "
            "excluded.fingerprint_position WHERE t.owner_epoch = excluded.owner_epoch RETURNING "
            "\"partition\"");
    // The claim binds the row to the data table and returns the binding it holds.
    prepare("co_position_claim_next",
            "INSERT INTO \"commit_order_positions\" AS t (stream, topic, \"partition\", "
            "position, owner_epoch, bound_to) VALUES ($1, $2, $3, NULL, 1, $4) ON CONFLICT "
            "(stream, topic, \"partition\") DO UPDATE SET owner_epoch = t.owner_epoch + 1, "
            "bound_to = COALESCE(t.bound_to, excluded.bound_to) RETURNING owner_epoch, "
            "position, bound_to, CASE WHEN fingerprint_position = position THEN fingerprint END");
    prepare("co_write",
            "INSERT INTO \"orders_flat\" AS t (\"order_id\", \"customer_id\", \"total_cents\", "
            "\"event_seq\", \"source_partition\", \"source_offset\") SELECT * FROM "
            "unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::integer[], "
            "$6::bigint[]) ON CONFLICT (\"order_id\") DO UPDATE SET \"customer_id\" = "
            "excluded.\"customer_id\", \"total_cents\" = excluded.\"total_cents\", "
            "\"event_seq\" = excluded.\"event_seq\", \"source_partition\" = "
            "excluded.\"source_partition\", \"source_offset\" = excluded.\"source_offset\" WHERE "
            "t.\"source_partition\" = excluded.\"source_partition\" AND t.\"source_offset\" < "
            "excluded.\"source_offset\" RETURNING \"source_partition\", \"source_offset\"");
    // The claim: a fresh epoch, and where to start.
    exec("BEGIN");
    const std::string bound = "'" + schema + ".orders_flat'";
    const char* claim[] = {"orders", "default", "0", bound.c_str()};
    const pg::result c = exec_prepared("co_position_claim_next", 4, claim);
    if (c.text(0, 2) != bound)
      throw std::runtime_error("the position row is bound to another table");
    epoch_ = std::to_string(c.integer(0, 0));
    epoch_array_ = "{" + epoch_ + "}";
    position_ = c.integer(0, 1);
    exec("COMMIT");
    reader_.seek(co::position{position_});
  }

  /// One batch; 0 at the end of the round.
  std::size_t step() {
    const auto records = reader_.poll(batch_);
    const std::size_t n = records.size();
    if (n == 0)
      return 0;
    // Every row, in the order the records came, in one statement: a statement cannot touch a
    // row twice, and the benchmark's batches never repeat a key (record i is order i % orders,
    // orders > batch). The adapter would start a second statement at a repeated key; the twin
    // refuses such a batch rather than measure something else.
    order_.clear();
    for (std::uint32_t i = 0; i < n; ++i)
      order_.push_back(i);
    const auto by_key = [&](std::uint32_t a, std::uint32_t b) {
      return records[a].event.order_id < records[b].event.order_id;
    };
    if (!std::is_sorted(order_.begin(), order_.end(), by_key))
      std::sort(order_.begin(), order_.end(), by_key);
    if (std::adjacent_find(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
          return !by_key(a, b);
        }) != order_.end())
      throw std::logic_error("postgres twin: a batch repeats a key; the cases never do");
    for (auto& a : arrays_)
      a.clear();
    for (std::size_t k = 0; k < n; ++k) {
      const auto& r = records[k];
      arrays_[0].add(r.event.order_id);
      arrays_[1].add(r.event.customer_id);
      arrays_[2].add(r.event.total_cents);
      arrays_[3].add(r.event.event_seq);
      arrays_[4].add(0);
      arrays_[5].add(r.source_offset.value());
    }
    const std::size_t rows = n;
    const char* values[6];
    for (std::size_t c = 0; c < 6; ++c)
      values[c] = arrays_[c].finish();
    const std::int64_t next = records[n - 1].source_offset.value() + 1;
    position_array_ = "{" + std::to_string(next) + "}";
    const char* fence[] = {"orders", "default", "{0}"};
    const char* store[] = {
        "orders", "default", "{0}", position_array_.c_str(), epoch_array_.c_str(), "{NULL}"};

    // One round trip: BEGIN, the fence, the rows, the position.
    PQenterPipelineMode(conn_.get());
    PQsendQueryParams(conn_.get(), "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0);
    PQsendQueryPrepared(conn_.get(), "co_position_fence", 3, fence, nullptr, nullptr, 0);
    PQsendQueryPrepared(conn_.get(), "co_write", 6, values, nullptr, nullptr, 0);
    PQsendQueryPrepared(conn_.get(), "co_position_store", 6, store, nullptr, nullptr, 0);
    PQpipelineSync(conn_.get());
    const pg::result begun = next_result();
    const pg::result fenced = next_result();
    const pg::result written = next_result();
    const pg::result stored = next_result();
    end_pipeline();
    if (!begun.ok() || !fenced.ok() || !written.ok() || !stored.ok())
      throw std::runtime_error("the batch failed");
    // The fence holds and the position changed its row -- before COMMIT is sent.
    if (fenced.rows() != 1 || fenced.text(0, 1) != epoch_ || stored.rows() != 1)
      throw co::fenced(co::epoch{std::stoll(epoch_)}, co::epoch{fenced.integer(0, 1)});
    absorbed_ += rows - static_cast<std::size_t>(written.rows());

    PQenterPipelineMode(conn_.get());
    PQsendQueryParams(conn_.get(), "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0);
    PQpipelineSync(conn_.get());
    const pg::result committed = next_result();
    end_pipeline();
    if (!committed.ok())
      throw std::runtime_error("COMMIT failed: " + committed.message());
    position_ = next;
    return n;
  }

  [[nodiscard]] std::size_t absorbed() const noexcept { return absorbed_; }

 private:
  pg::result exec(const std::string& sql) {
    pg::result r(PQexec(conn_.get(), sql.c_str()));
    if (!r.ok())
      throw std::runtime_error(sql + ": " + r.message());
    return r;
  }
  pg::result exec_prepared(const char* name, int n, const char* const* values) {
    pg::result r(PQexecPrepared(conn_.get(), name, n, values, nullptr, nullptr, 0));
    if (!r.ok())
      throw std::runtime_error(std::string(name) + ": " + r.message());
    return r;
  }
  void prepare(const char* name, const char* sql) {
    pg::result r(PQprepare(conn_.get(), name, sql, 0, nullptr));
    if (!r.ok())
      throw std::runtime_error(std::string(name) + ": " + r.message());
  }
  pg::result next_result() {
    pg::result r(PQgetResult(conn_.get()));
    while (PGresult* end = PQgetResult(conn_.get()))  // the statement's end marker
      PQclear(end);
    return r;
  }
  void end_pipeline() {
    pg::result sync(PQgetResult(conn_.get()));
    if (sync.status() != PGRES_PIPELINE_SYNC || PQexitPipelineMode(conn_.get()) != 1)
      throw std::runtime_error("the pipeline did not end");
  }

  struct closer {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };
  std::size_t batch_;
  std::unique_ptr<PGconn, closer> conn_;
  reader_t reader_ = shared_log().make_reader();
  std::int64_t position_ = 0;
  std::string epoch_;
  std::string epoch_array_;
  std::string position_array_;
  std::vector<std::uint32_t> order_;
  pg::detail::array_builder arrays_[6];
  std::size_t absorbed_ = 0;
};

}  // namespace postgres_bench
