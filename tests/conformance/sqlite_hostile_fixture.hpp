// SPDX-License-Identifier: BSL-1.0
// The adversarial tier's fixtures over the SQLite sinks (commit_order/testing/adversarial.hpp):
// a table of hostile_event keyed on its integer id or on its double, the SQLite position store
// in the same database (two consumers of one database share it), and a sibling consumer over
// the same database with its own table, every option at its default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <commit_order/adapters/memory.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/testing/fixture.hpp>

#include "conformance/hostile_event.hpp"
#include "conformance/storage.hpp"

namespace conformance {

namespace co = commit_order;
namespace sq = commit_order::sqlite;

template <sq::fixed_string Table>
using id_keyed_hostile = sq::table_layout<
    Table, hostile_event, sq::key_columns<sq::column<"id", &hostile_event::id>>,
    sq::value_columns<
        sq::column<"real", &hostile_event::real>, sq::column<"big", &hostile_event::big>,
        sq::column<"text", &hostile_event::text>, sq::column<"flag", &hostile_event::flag>>>;

template <sq::fixed_string Table>
using real_keyed_hostile = sq::table_layout<
    Table, hostile_event, sq::key_columns<sq::column<"real", &hostile_event::real>>,
    sq::value_columns<sq::column<"id", &hostile_event::id>, sq::column<"big", &hostile_event::big>,
                      sq::column<"text", &hostile_event::text>,
                      sq::column<"flag", &hostile_event::flag>>>;
template <sq::fixed_string Table, class Values, sq::fixed_string O, sq::fixed_string P>
inline constexpr bool keyed_on_real<
    sq::table_layout<Table, hostile_event,
                     sq::key_columns<sq::column<"real", &hostile_event::real>>, Values, O, P>> =
    true;

template <class Mode, class Layout, class SiblingLayout = void>
class sqlite_hostile_fixture {
 public:
  using event_type = hostile_event;
  using source_type = co::memory::log<hostile_event, co::Synced>;
  using sink_type = sq::table_sink<Layout, Mode>;
  using store_type = sq::position_store<>;
  static constexpr bool source_is_stand_in = true;

  sqlite_hostile_fixture() : dir_(std::make_shared<storage_dir>()) {}
  /// A second consumer over `first`'s database.
  template <class M, class L, class S>
  explicit sqlite_hostile_fixture(sqlite_hostile_fixture<M, L, S>& first) : dir_(first.storage()) {}

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
    if (!sink_)
      sink_.emplace(file());  // every option at its default
    return *sink_;
  }
  store_type& store() {
    if (!store_)
      store_.emplace(file());
    return *store_;
  }
  void close() {
    store_.reset();
    sink_.reset();
  }

  std::vector<co::testing::observed_row<hostile_event>> rows() {
    std::vector<co::testing::observed_row<hostile_event>> out;
    auto q = sink().database().prepare("SELECT id, real, big, text, flag, source_offset FROM " +
                                       std::string(Layout::name) + " ORDER BY rowid");
    while (q.step()) {
      const hostile_event e{q.column_int64(0), q.column_double(1), q.column_int64(2),
                            q.column_text(3), q.column_int64(4) != 0};
      out.push_back({e.id, co::offset{q.column_int64(5)}, e});
    }
    return out;
  }

  [[nodiscard]] std::shared_ptr<storage_dir> storage() const { return dir_; }

 private:
  [[nodiscard]] std::filesystem::path file() const { return *dir_ / "db.sqlite"; }

  std::shared_ptr<storage_dir> dir_;
  source_type log_;
  std::optional<sink_type> sink_;
  std::optional<store_type> store_;
};

/// The fixture with a sibling: a second consumer of the same database, into `hostile_copy`.
template <class Mode>
class sqlite_shared_fixture
    : public sqlite_hostile_fixture<Mode, id_keyed_hostile<"hostile_rows">> {
 public:
  using sibling_type = sqlite_hostile_fixture<Mode, id_keyed_hostile<"hostile_copy">>;
};

}  // namespace conformance
