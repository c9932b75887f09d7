// SPDX-License-Identifier: BSL-1.0
// support/lab/pg_lab.hpp — the lab's PostgreSQL side: the same table and the same four
// policies as with SQLite, in one schema per policy of a PostgreSQL database.
//
//   AtMostOnce<AutoCommit>  postgres::upsert_sink          + postgres::position_store
//   AtMostOnce              postgres::append_sink          + the position file
//   AtLeastOnce             postgres::guarded_upsert_sink  + the position file
//   TransactionalPosition   postgres::guarded_upsert_sink, its position in the same transaction
//
// Every part is `synced`: the server must run with fsync=on (the lab's own throwaway server
// does), or the sinks refuse it (durability_mismatch) -- the rules would otherwise compare a
// Synced position file with a sink that is not.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/lab/policies.hpp"

namespace crash_lab {

namespace pgl = commit_order::postgres;

/// orders_flat in PostgreSQL: the same columns, plus the partition every row carries.
struct pg_orders_flat final
    : pgl::table_layout<"orders_flat", order_event,
                        pgl::key_columns<pgl::column<"order_id", &order_event::order_id>>,
                        pgl::value_columns<pgl::column<"customer_id", &order_event::customer_id>,
                                           pgl::column<"total_cents", &order_event::total_cents>,
                                           pgl::column<"event_seq", &order_event::event_seq>>> {};

/// The schema a policy's tables live in.
inline std::string pg_schema_of(policy_id p) {
  std::string name = "lab_";
  for (const char c : flag_name(p))
    name.push_back(c == '-' ? '_' : c);
  return name;
}

/// A plain libpq connection for the supervisor (schemas, snapshots).
class pg_client final {
 public:
  explicit pg_client(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(conn_.get()) != CONNECTION_OK)
      throw std::runtime_error("crash_lab: cannot connect to PostgreSQL: " +
                               std::string(PQerrorMessage(conn_.get())));
    exec("SET client_min_messages = warning");
  }
  pgl::result exec(const std::string& sql) {
    pgl::result r(PQexec(conn_.get(), sql.c_str()));
    if (!r.ok())
      throw std::runtime_error("crash_lab: " + sql + ": " + r.message());
    return r;
  }
  bool has_table(const std::string& schema, const std::string& table) {
    return exec("SELECT 1 FROM information_schema.tables WHERE table_schema = '" + schema +
                "' AND table_name = '" + table + "'")
               .rows() == 1;
  }

 private:
  struct closer {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };
  std::unique_ptr<PGconn, closer> conn_;
};

/// Drops what an earlier run left in the policy's schema.
inline void pg_reset_schema(const std::string& conninfo, policy_id p) {
  pg_client c(conninfo);
  c.exec("DROP SCHEMA IF EXISTS " + pg_schema_of(p) + " CASCADE");
}

/// Waits until no session named `application_name` is left on the server (a killed
/// consumer's backend ends once it has finished what it was doing and noticed the client is
/// gone).
inline void pg_wait_until_gone(const std::string& conninfo, const std::string& application_name) {
  pg_client c(conninfo);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (
      c.exec("SELECT 1 FROM pg_stat_activity WHERE application_name = '" + application_name + "'")
          .rows() != 0) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("crash_lab: the sessions of killed consumer " + application_name +
                               " did not end");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// The PostgreSQL sink under test, with the same pause before each write as the SQLite one.
/// Its rows go to the server when the unit commits, and so do its replays: after each commit
/// it reports how many rows the guard absorbed.
template <class Sink>
class pg_paced final : public Sink {
 public:
  template <class Report, class... Args>
  pg_paced(std::chrono::microseconds pace, const Report& report, Args&&... args)
      : Sink(std::forward<Args>(args)...)
      , pace_(pace)
      , report_([&report](std::int64_t n) { report.line("absorbed", n); }) {}

  void apply(co::offset source_offset, const order_event& row) {
    if (pace_.count() > 0)
      std::this_thread::sleep_for(pace_);
    Sink::apply(co::partition_id{0}, source_offset, row);
  }

  void commit() {
    Sink::commit();
    const auto absorbed = Sink::stats().rows_absorbed;
    if (absorbed != reported_) {
      report_(static_cast<std::int64_t>(absorbed - reported_));
      reported_ = absorbed;
    }
  }

 private:
  std::chrono::microseconds pace_;
  std::function<void(std::int64_t)> report_;
  std::uint64_t reported_ = 0;
};

/// The options of a policy's sink or store: its schema, the lab's stream.
inline pgl::sink_options pg_sink_options(policy_id p) {
  pgl::sink_options o;
  o.schema = pg_schema_of(p);
  o.stream = std::string(stream_name);
  return o;
}
inline pgl::store_options pg_store_options(policy_id p) {
  pgl::store_options o;
  o.schema = pg_schema_of(p);
  o.stream = std::string(stream_name);
  return o;
}

}  // namespace crash_lab
