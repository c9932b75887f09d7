// SPDX-License-Identifier: BSL-1.0
// What the PostgreSQL tests share: the server the CTest fixture started (its connection string
// in the file $CO_PG_CONNINFO_FILE, or $CO_PG_SYNCED_CONNINFO_FILE for the fsync=on server),
// a fresh schema per test, and a plain libpq connection to look at what the sinks left.
//
// Run outside ctest (no fixture), a test binary starts a throwaway server of its own for the
// whole run. There is no skip: a machine without PostgreSQL fails these tests.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <commit_order/adapters/postgres.hpp>

#include "support/lab/pg_server.hpp"

namespace pg_test {

namespace co = commit_order;
namespace pg = commit_order::postgres;

inline std::string read_conninfo(const char* variable, bool fsync) {
  if (const char* file = std::getenv(variable); file != nullptr && *file != '\0') {
    std::ifstream f(file);
    std::string line;
    if (!std::getline(f, line) || line.empty())
      throw std::runtime_error(std::string("$") + variable + " names " + file +
                               ", which holds no connection string: the postgres fixture "
                               "(postgres.server_start) did not start its server");
    return line;
  }
  // No fixture: one server of our own for the whole process, stopped at exit.
  static std::unique_ptr<crash_lab::pg_server> fast, synced;
  auto& slot = fsync ? synced : fast;
  if (!slot)
    slot = std::make_unique<crash_lab::pg_server>(crash_lab::pg_server_options{fsync});
  return slot->conninfo();
}

/// The fixture's server with fsync=off (Buffered at best).
inline std::string conninfo() {
  return read_conninfo("CO_PG_CONNINFO_FILE", false);
}
/// The fixture's server with fsync=on (Synced).
inline std::string synced_conninfo() {
  return read_conninfo("CO_PG_SYNCED_CONNINFO_FILE", true);
}

/// A plain connection for looking at tables.
class client final {
 public:
  explicit client(const std::string& conninfo, const std::string& schema = {})
      : conn_(PQconnectdb(conninfo.c_str())) {
    if (PQstatus(conn_.get()) != CONNECTION_OK)
      throw std::runtime_error("pg_test::client: " + std::string(PQerrorMessage(conn_.get())));
    exec("SET client_min_messages = warning");
    if (!schema.empty())
      exec("SET search_path TO \"" + schema + "\"");
  }

  /// Runs `sql`; throws with the server's message when it fails.
  pg::result exec(const std::string& sql) {
    pg::result r(PQexec(conn_.get(), sql.c_str()));
    if (!r.ok())
      throw std::runtime_error("pg_test::client: " + sql + ": " + r.message());
    return r;
  }
  /// The single text `sql` returns ("" for NULL or no row).
  std::string text(const std::string& sql) {
    const pg::result r = exec(sql);
    if (r.rows() == 0 || r.is_null(0, 0))
      return {};
    return std::string(r.text(0, 0));
  }
  /// The single integer `sql` returns (nullopt for NULL or no row).
  std::optional<std::int64_t> integer(const std::string& sql) {
    const pg::result r = exec(sql);
    if (r.rows() == 0 || r.is_null(0, 0))
      return std::nullopt;
    return r.integer(0, 0);
  }
  std::int64_t count(const std::string& table_and_condition) {
    return integer("SELECT count(*) FROM " + table_and_condition).value_or(-1);
  }
  [[nodiscard]] PGconn* get() const noexcept { return conn_.get(); }

 private:
  struct closer {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };
  std::unique_ptr<PGconn, closer> conn_;
};

/// A fresh, empty schema named `name` (dropped first if an earlier run left it).
inline std::string fresh_schema(const std::string& conninfo, const std::string& name) {
  client c(conninfo);
  c.exec("DROP SCHEMA IF EXISTS \"" + name + "\" CASCADE");
  c.exec("CREATE SCHEMA \"" + name + "\"");
  return name;
}

}  // namespace pg_test
