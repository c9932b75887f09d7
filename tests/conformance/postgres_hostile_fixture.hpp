// SPDX-License-Identifier: BSL-1.0
// The adversarial tier's fixtures over the PostgreSQL sinks (commit_order/testing/adversarial.hpp):
// a table of hostile_event keyed on its integer id or on its double, the PostgreSQL position
// store in the same schema, and a sibling consumer over the same schema with its own table,
// every option but the schema at its default (the schema is the fixture's storage). Against
// the throwaway server of the PostgreSQL tests (fsync=off: postgres::buffered).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/postgres.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/hostile_event.hpp"
#include "postgres/pg_support.hpp"

namespace conformance {

namespace co = commit_order;
namespace pg = commit_order::postgres;

template <pg::fixed_string Table>
using pg_id_keyed_hostile = pg::table_layout<
    Table, hostile_event, pg::key_columns<pg::column<"id", &hostile_event::id>>,
    pg::value_columns<
        pg::column<"real", &hostile_event::real>, pg::column<"big", &hostile_event::big>,
        pg::column<"text", &hostile_event::text>, pg::column<"flag", &hostile_event::flag>>>;

template <pg::fixed_string Table>
using pg_real_keyed_hostile = pg::table_layout<
    Table, hostile_event, pg::key_columns<pg::column<"real", &hostile_event::real>>,
    pg::value_columns<pg::column<"id", &hostile_event::id>, pg::column<"big", &hostile_event::big>,
                      pg::column<"text", &hostile_event::text>,
                      pg::column<"flag", &hostile_event::flag>>>;
template <pg::fixed_string Table, class Values, pg::fixed_string O, pg::fixed_string P>
inline constexpr bool keyed_on_real<
    pg::table_layout<Table, hostile_event,
                     pg::key_columns<pg::column<"real", &hostile_event::real>>, Values, O, P>> =
    true;

/// A schema of its own, dropped with the last fixture that uses it.
class pg_schema final {
 public:
  pg_schema() : name_("adv_" + std::to_string(::getpid()) + "_" + std::to_string(next()++)) {
    pg_test::fresh_schema(pg_test::conninfo(), name_);
  }
  pg_schema(const pg_schema&) = delete;
  pg_schema& operator=(const pg_schema&) = delete;
  ~pg_schema() {
    try {
      pg_test::client(pg_test::conninfo()).exec("DROP SCHEMA \"" + name_ + "\" CASCADE");
    } catch (...) {
      // Left to the throwaway server, which goes with everything in it.
    }
  }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  static int& next() {
    static int n = 0;
    return n;
  }
  std::string name_;
};

template <template <class, class> class Sink, class Layout>
class postgres_hostile_fixture {
 public:
  using event_type = hostile_event;
  using source_type = co::memory::log<hostile_event, co::Buffered>;
  using sink_type = Sink<Layout, pg::buffered>;
  using store_type = pg::position_store<pg::buffered>;
  static constexpr bool source_is_stand_in = true;

  postgres_hostile_fixture() : schema_(std::make_shared<pg_schema>()) {}
  /// A second consumer over `first`'s schema.
  template <template <class, class> class S, class L>
  explicit postgres_hostile_fixture(postgres_hostile_fixture<S, L>& first)
      : schema_(first.schema()) {}

  static hostile_event make_event(std::int64_t key, std::int64_t seq) {
    return plain_hostile(key, seq);
  }
  static std::vector<hostile_event> hostile_events() { return hostile_values(); }
  static bool same_row(const hostile_event& a, const hostile_event& b) {
    return same_hostile(a, b);
  }
  static bool same_key(const hostile_event& a, const hostile_event& b) {
    return same_hostile_key<Layout>(a, b);
  }

  void create_log(std::span<const hostile_event> events) {
    for (const auto& e : events)
      log_.append(e);
  }
  source_type& source() { return log_; }
  sink_type& sink() {
    if (!sink_) {
      pg::sink_options o;
      o.schema = schema_->name();
      sink_.emplace(pg_test::conninfo(), o);
    }
    return *sink_;
  }
  store_type& store() {
    if (!store_) {
      pg::store_options o;
      o.schema = schema_->name();
      store_.emplace(pg_test::conninfo(), o);
    }
    return *store_;
  }
  void close() {
    store_.reset();
    sink_.reset();
  }

  std::vector<co::testing::observed_row<hostile_event>> rows() {
    std::vector<co::testing::observed_row<hostile_event>> out;
    pg_test::client c(pg_test::conninfo());
    const pg::result r =
        c.exec("SELECT id, real::text, big, text, flag, source_offset FROM \"" + schema_->name() +
               "\"." + std::string(Layout::name) + " ORDER BY source_offset");
    for (int i = 0; i < r.rows(); ++i) {
      hostile_event e{r.integer(i, 0), real_of(r.text(i, 1)), r.integer(i, 2),
                      std::string(r.text(i, 3)), r.text(i, 4) == "t"};
      out.push_back({e.id, co::offset{r.integer(i, 5)}, std::move(e)});
    }
    return out;
  }

  [[nodiscard]] std::shared_ptr<pg_schema> schema() const { return schema_; }

 private:
  static double real_of(std::string_view t) {
    return std::strtod(std::string(t).c_str(), nullptr);  // NaN, Infinity, -Infinity included
  }

  std::shared_ptr<pg_schema> schema_;
  source_type log_;
  std::optional<sink_type> sink_;
  std::optional<store_type> store_;
};

template <class L, class D>
using pg_guarded_t = pg::guarded_upsert_sink<L, D>;
template <class L, class D>
using pg_upsert_t = pg::upsert_sink<L, D>;
template <class L, class D>
using pg_append_t = pg::append_sink<L, D>;

/// The fixture with a sibling: a second consumer of the same schema, into `hostile_copy`.
template <template <class, class> class Sink>
class postgres_shared_fixture
    : public postgres_hostile_fixture<Sink, pg_id_keyed_hostile<"hostile_rows">> {
 public:
  using sibling_type = postgres_hostile_fixture<Sink, pg_id_keyed_hostile<"hostile_copy">>;
};

}  // namespace conformance
