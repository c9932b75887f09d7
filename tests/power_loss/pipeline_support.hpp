// SPDX-License-Identifier: BSL-1.0
// Whole pipelines under power cuts: the crash lab's order events in a file log, consumed into
// the SQLite table orders_flat under a policy, cut at every sync point of the run (or a seeded
// sample), then recovered by a fresh pipeline from the durable image alone and run to the end of
// the log, and reconciled with the log.
//
// The sink's database and the position store live in directories of their own (db/, state/), as
// they would on separate volumes or under separate owners. In one directory, the store's
// directory sync would also make the sink's last journal deletion durable, and hide a commit the
// sink acknowledged but did not make durable: the layout must not be what keeps records safe.
//
// What the run acknowledged before the cut is recorded by thin wrappers around the real sink
// and store (`acking_sink`, `acking_store`): a write or commit that returned while the power
// was still on. The wrappers forward everything else, capabilities included, so the pipeline
// is judged by the same rules as the bare parts.
#pragma once

#include <array>
#include <commit_order/adapters/file.hpp>
#include <commit_order/adapters/sqlite.hpp>
#include <commit_order/commit_order.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "power_loss/cut_points.hpp"
#include "power_loss/sqlite_configs.hpp"
#include "support/lab/orders.hpp"
#include "support/scratch.hpp"

namespace power_loss::pipelines {

namespace fs = std::filesystem;
namespace co = commit_order;
namespace sq = commit_order::sqlite;
using crash_lab::order_event;
using crash_lab::order_log;
using crash_lab::orders_flat;

// 40 events over 6 orders: every order is updated several times. Each scenario runs in units of
// one record (a write and a commit per record: the most interleaving of the two) and of five
// (several rows per unit); a cut can fall in any unit, between any two rows, inside any commit.
constexpr std::int64_t records = 40;
constexpr std::int64_t orders = 6;
inline constexpr std::array<std::size_t, 2> batches{1, 5};
constexpr std::uint64_t log_seed = 8;
inline const std::string stream = "orders";

/// What a run acknowledged before the power went out.
struct acknowledgements {
  std::optional<co::position> committed;      ///< the last position commit that returned
  std::vector<co::position> commits_begun;    ///< every position commit started, in order
  std::map<std::int64_t, std::int64_t> rows;  ///< keyed sink: order -> newest offset written
  std::set<std::int64_t> appended;            ///< append sink: offsets whose row was written
};

/// The real sink, recording what it acknowledged: a row written outside a transaction once its
/// apply() returned, a transaction's rows and position once its commit() returned.
template <class Sink>
class acking_sink final : public Sink {
 public:
  template <class... Args>
  explicit acking_sink(acknowledgements& ack, Args&&... args)
      : Sink(std::forward<Args>(args)...), ack_(&ack) {}

  co::write_outcome apply(co::offset source_offset, const order_event& row) {
    const co::write_outcome outcome = Sink::apply(co::partition_id{0}, source_offset, row);
    const std::pair<std::int64_t, std::int64_t> written{row.order_id, source_offset.value()};
    if (this->database().in_transaction())
      pending_.push_back(written);
    else if (!power_is_out())
      acknowledge(written);
    return outcome;
  }

  void begin() {
    Sink::begin();
    pending_.clear();
    pending_position_.reset();
  }
  void store_position(co::position p) {
    Sink::store_position(co::partition_id{0}, p);
    pending_position_ = p;
  }
  void commit() {
    if (pending_position_)
      ack_->commits_begun.push_back(*pending_position_);
    Sink::commit();
    if (!power_is_out()) {
      for (const auto& w : pending_)
        acknowledge(w);
      if (pending_position_)
        ack_->committed = pending_position_;
    }
    pending_.clear();
    pending_position_.reset();
  }
  void rollback() noexcept {
    Sink::rollback();
    pending_.clear();
    pending_position_.reset();
  }

 private:
  void acknowledge(const std::pair<std::int64_t, std::int64_t>& w) {
    if constexpr (Sink::mode::keyed) {
      auto& newest = ack_->rows[w.first];
      newest = std::max(newest, w.second);
    } else {
      ack_->appended.insert(w.second);
    }
  }

  acknowledgements* ack_;
  std::vector<std::pair<std::int64_t, std::int64_t>> pending_;
  std::optional<co::position> pending_position_;
};

/// The real position store, recording every commit begun and the last one that returned.
template <class Store>
class acking_store final {
 public:
  using capabilities = typename Store::capabilities;

  template <class... Args>
  explicit acking_store(acknowledgements& ack, Args&&... args)
      : store_(std::forward<Args>(args)...), ack_(&ack) {}

  [[nodiscard]] std::optional<co::position> load() { return store_.load(); }
  void commit(co::position p) {
    ack_->commits_begun.push_back(p);
    if constexpr (co::position_store<Store>)
      store_.commit(p);  // a store of one position (the file's)
    else
      store_.commit(co::partition_id{0}, p);  // partition 0's of a store per partition
    if (!power_is_out())
      ack_->committed = p;
  }

 private:
  Store store_;
  acknowledgements* ack_;
};

// ---- the parts a scenario is made of ----------------------------------------------------------

template <class Config, class Mode>
struct sqlite_sink_part {
  using type = acking_sink<typename Config::template sink<orders_flat, Mode>>;
  static type make(acknowledgements& ack, const fs::path& root) {
    return type(ack, root / "db" / "orders.db", sink_options(stream));
  }
};

struct file_store_part {
  static constexpr bool none = false;
  using type = acking_store<co::file::position_store>;
  static type make(acknowledgements& ack, const fs::path& root) {
    return type(ack, root / "state" / "position");
  }
  static std::string integrity(const fs::path&) { return "ok"; }
};

/// The SQLite position store, in a database of its own (in the sink's database its commits
/// would share the sink's journal: a separate store is what AtLeastOnce is for).
template <class Config>
struct sqlite_store_part {
  static constexpr bool none = false;
  using type = acking_store<typename Config::store>;
  static type make(acknowledgements& ack, const fs::path& root) {
    return type(ack, root / "state" / "positions.db", store_options(stream));
  }
  static std::string integrity(const fs::path& root) {
    auto db = Config::open(root / "state" / "positions.db");
    return power_loss::integrity(db);
  }
};

/// TransactionalPosition: the position lives in the sink's transaction.
struct no_store_part {
  static constexpr bool none = true;
  static std::string integrity(const fs::path&) { return "ok"; }
};

// ---- running and recovering -----------------------------------------------------------------

/// The log every run consumes and the directories of the database and the store: all in place
/// (and so durable) before the shim watches the root.
inline void prepare_log(const fs::path& root) {
  crash_lab::write_orders(root / "log", records, orders, log_seed);
  fs::create_directories(root / "db");
  fs::create_directories(root / "state");
}

/// Builds the pipeline over the parts and calls f(pipeline, sink).
template <class Policy, class SinkPart, class StorePart, class F>
void with_pipeline(acknowledgements& ack, const fs::path& root, std::size_t batch, F f) {
  using sink_t = typename SinkPart::type;
  order_log log(root / "log", crash_lab::lab_log_options());
  sink_t sink = SinkPart::make(ack, root);
  const co::settings settings{.batch_size = batch};
  if constexpr (StorePart::none) {
    co::pipeline<order_log, sink_t, Policy> p(log, sink, settings);
    f(p, sink, static_cast<const void*>(nullptr));
  } else {
    using store_t = typename StorePart::type;
    store_t store = StorePart::make(ack, root);
    co::pipeline<order_log, sink_t, Policy, co::with_store<store_t>> p(log, sink, store, settings);
    f(p, sink, &store);
  }
}

/// The run under the shim: until the log's end, or until the power goes out.
template <class Policy, class SinkPart, class StorePart>
acknowledgements run_until_cut(const fs::path& root, std::size_t batch) {
  acknowledgements ack;
  with_pipeline<Policy, SinkPart, StorePart>(ack, root, batch, [](auto& p, auto&, const auto*) {
    if (power_is_out())
      return;
    p.recover();
    while (!power_is_out() && p.poll_once() != 0) {
    }
  });
  return ack;
}

/// One row of orders_flat.
struct row {
  std::int64_t order_id = 0;
  std::int64_t source_offset = 0;
  order_event event;
};

template <class Sink>
std::vector<row> read_rows(Sink& sink) {
  std::vector<row> rows;
  auto q = sink.database().prepare(
      "SELECT order_id, customer_id, total_cents, event_seq, source_offset FROM orders_flat "
      "ORDER BY rowid");
  while (q.step()) {
    const order_event e{q.column_int64(0), q.column_int64(1), q.column_int64(2), q.column_int64(3)};
    rows.push_back(row{e.order_id, q.column_int64(4), e});
  }
  return rows;
}

/// For a keyed table: each order's row offset (the newest record it reflects).
inline std::map<std::int64_t, std::int64_t> offsets_by_order(const std::vector<row>& rows) {
  std::map<std::int64_t, std::int64_t> out;
  for (const auto& r : rows)
    out[r.order_id] = r.source_offset;
  return out;
}

/// The log's events by offset (the reconciliation's ground truth), from a copy written outside
/// the watched root.
inline std::vector<order_event> reference_events(const fs::path& dir) {
  crash_lab::write_orders(dir, records, orders, log_seed);
  return crash_lab::read_orders(dir);
}

/// What the recovery found, beyond the generic findings: for the policy checks.
struct recovery {
  std::optional<co::position> stored;
  std::vector<row> recovered;   // the table as the cut left it
  std::vector<row> final_rows;  // after the fresh pipeline ran to the end
};

/// Recovers from the materialised image: reopens every part (a file that does not reopen is a
/// problem), reads the table and the stored position as the cut left them, then runs a fresh
/// pipeline to the end of the log and reads the table again. Checks shared by every policy:
/// integrity, the acknowledged position and writes, and that every row is an event of the log.
template <class Policy, class SinkPart, class StorePart>
recovery recover_and_finish(const fs::path& root, const acknowledgements& ack,
                            const std::vector<order_event>& log_events, std::size_t batch,
                            findings& f) {
  using sink_t = typename SinkPart::type;
  constexpr bool sink_synced = std::is_same_v<co::durability_t<sink_t>, co::Synced>;
  recovery r;
  if (const auto verdict = StorePart::integrity(root); verdict != "ok")
    f.problems.push_back("the position database: integrity_check: " + verdict);
  acknowledgements ignored;
  with_pipeline<Policy, SinkPart, StorePart>(
      ignored, root, batch, [&](auto& p, auto& sink, auto* store) {
        if (const auto verdict = power_loss::integrity(sink.database()); verdict != "ok")
          f.problems.push_back("integrity_check: " + verdict);
        if constexpr (StorePart::none)
          r.stored = sink.load_position();
        else
          r.stored = store->load();
        r.recovered = read_rows(sink);

        // A position commit that returned is durable when its part says Synced.
        if (ack.committed && (!r.stored || *r.stored < *ack.committed))
          ++f.counts["acknowledged position commits lost"];
        // A write that returned is durable when the sink says Synced.
        std::int64_t rolled_back = 0;
        if constexpr (sink_t::mode::keyed) {
          const auto now = offsets_by_order(r.recovered);
          for (const auto& [order, offset] : ack.rows) {
            const auto it = now.find(order);
            rolled_back += (it == now.end() || it->second < offset) ? 1 : 0;
          }
        } else {
          std::set<std::int64_t> present;
          for (const auto& row : r.recovered)
            present.insert(row.source_offset);
          for (std::int64_t o : ack.appended)
            rolled_back += present.contains(o) ? 0 : 1;
        }
        if (rolled_back > 0)
          f.counts[sink_synced ? "acknowledged writes rolled back"
                               : "acknowledged writes rolled back (sink declared Buffered)"] +=
              rolled_back;

        p.recover();
        p.run();
        if (p.read_position() != co::position{records})
          f.problems.push_back("the recovered pipeline stopped at " +
                               std::to_string(p.read_position().value()));
        r.final_rows = read_rows(sink);
      });
  for (const auto& row : r.final_rows) {
    const auto at = static_cast<std::size_t>(row.source_offset);
    if (row.source_offset < 0 || at >= log_events.size() || !(log_events[at] == row.event))
      f.problems.push_back("a row (order " + std::to_string(row.order_id) + ", offset " +
                           std::to_string(row.source_offset) + ") is no event of the log");
  }
  return r;
}

/// Keyed table. At recovery: every record behind the stored position has its effect (its order's
/// row reflects it or a later record); one that does not is lost, since the restart begins at
/// the stored position and nothing replays it. After the run to the end: every order shows its
/// last event, has one row, and no order went back to an older event than the cut left it.
inline void reconcile_keyed(const recovery& r, const acknowledgements&,
                            const std::vector<order_event>& log_events, std::size_t, findings& f) {
  const auto at_recovery = offsets_by_order(r.recovered);
  std::map<std::int64_t, std::int64_t> vouched;  // order -> last offset behind the position
  for (std::int64_t i = 0; i < r.stored.value_or(co::position{0}).value(); ++i)
    vouched[log_events[static_cast<std::size_t>(i)].order_id] = i;
  for (const auto& [order, offset] : vouched) {
    const auto it = at_recovery.find(order);
    if (it == at_recovery.end() || it->second < offset)
      ++f.lost;
  }

  std::map<std::int64_t, std::int64_t> last;
  for (std::size_t i = 0; i < log_events.size(); ++i)
    last[log_events[i].order_id] = static_cast<std::int64_t>(i);
  std::map<std::int64_t, int> copies;
  for (const auto& row : r.final_rows)
    ++copies[row.order_id];
  for (const auto& [order, n] : copies)
    if (n > 1)
      f.problems.push_back("order " + std::to_string(order) + " has " + std::to_string(n) +
                           " rows");
  const auto at_end = offsets_by_order(r.final_rows);
  for (const auto& [order, offset] : last) {
    const auto it = at_end.find(order);
    if (it == at_end.end() || it->second < offset)
      f.problems.push_back("order " + std::to_string(order) +
                           " does not show its last event after the run to the end");
  }
  for (const auto& [order, offset] : at_recovery) {
    const auto it = at_end.find(order);
    if (it == at_end.end() || it->second < offset)
      f.problems.push_back("order " + std::to_string(order) +
                           " went back to an older event after the recovery");
  }
}

/// Runs the scenario at every cut point, in units of `batch` records: recover_and_finish, then
/// reconcile(recovery, acknowledgements, log events, batch, findings) for the policy's checks.
template <class Policy, class SinkPart, class StorePart, class Reconcile>
tally run_pipeline_cuts(const std::string& name, std::size_t batch, std::string lost_label,
                        Reconcile reconcile) {
  test_support::scratch_dir scratch;
  const auto events = reference_events(scratch / "reference");
  cut_options options;
  options.lost_label = std::move(lost_label);
  options.tail_seeds = {0, 29};
  return run_cut_points(
      name + ", units of " + std::to_string(batch), scratch / "root", prepare_log,
      [batch](const fs::path& root) {
        return run_until_cut<Policy, SinkPart, StorePart>(root, batch);
      },
      [&](const fs::path& root, const acknowledgements& ack) {
        findings f;
        const auto r = recover_and_finish<Policy, SinkPart, StorePart>(root, ack, events, batch, f);
        reconcile(r, ack, events, batch, f);
        return f;
      },
      options);
}

}  // namespace power_loss::pipelines
