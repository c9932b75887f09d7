// SPDX-License-Identifier: BSL-1.0
// The shared SQL position protocol (adapters/detail/position_protocol.hpp) as the SQLite
// position store judges it: what a refused write is called.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>

#include "support/scratch.hpp"

namespace co = commit_order;
namespace sq = commit_order::sqlite;
using test_support::scratch_dir;

TEST_CASE("an unbound SQLite position store's commit on a bound row is position_bound_elsewhere") {
  // docs/adapters.md: a store used on its own is unbound: it reads any row and writes none that
  // is bound; commit() of a row bound elsewhere is position_bound_elsewhere, and nothing
  // changes. The row is at epoch 0 (a store's), so the refusal is the binding, not a fencing.
  scratch_dir dir;
  sq::position_store<> store(dir / "db.sqlite");
  store.commit(co::partition_id{0}, co::position{10});
  {
    sq::connection db = sq::connection::open_keeping_journal(dir / "db.sqlite");
    db.exec("UPDATE commit_order_positions SET bound_to = '''orders_flat'''");
  }
  try {
    store.commit(co::partition_id{0}, co::position{3});
    FAIL("an unbound store wrote a bound row");
  } catch (const co::position_bound_elsewhere& e) {
    CHECK(e.bound_to() == "'orders_flat'");
  } catch (const co::fenced& e) {
    FAIL("reported as fenced (by epoch 0, the store's own): " << std::string(e.what()));
  }
  CHECK(store.load() == co::position{10});
}
