// SPDX-License-Identifier: BSL-1.0
// commit_order/testing/capability_checks.hpp — each capability a part declares, checked by what
// the part does (never by what it says):
//
//   Idempotent      a replay (the same record applied again, also after reopening, also inside
//                   a transaction) rewrites its row and never adds one
//   OffsetGuarded   an older offset, or the same one again, never replaces a newer row and is
//                   reported absorbed; a newer one wins
//   Transactional   a rollback discards the transaction's rows and position, and restores the
//                   last committed state (not an older one); a committed transaction and its
//                   position survive reopening
//   position store  nothing before the first commit; each commit survives reopening
//   retention       a reader behind earliest() gets position_lost{its position, earliest} from
//                   its next poll — on every poll until it seeks, never a jump; a seek below
//                   earliest() is position_lost; a pipeline whose stored position retention
//                   overtook gets position_lost from recover()
//
// Synced is checked across simulated power cuts (power_checks.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "commit_order/capabilities.hpp"
#include "commit_order/detail/loop/parts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/record.hpp"
#include "commit_order/testing/detail/scenario.hpp"
#include "commit_order/testing/fixture.hpp"
#include "commit_order/testing/options.hpp"
#include "commit_order/testing/report.hpp"

namespace commit_order::testing {

namespace detail {

/// A write the sink must show: (key, offset, seq) of the kit's event.
struct expected_write {
  std::int64_t key = 0;
  std::int64_t offset = 0;
  std::int64_t seq = 0;
  friend auto operator<=>(const expected_write&, const expected_write&) = default;
};

/// The rows a list of durable writes leaves: the last per key (keyed), or all of them.
inline std::vector<expected_write> rows_left_by(const std::vector<expected_write>& writes,
                                                bool keyed) {
  if (!keyed) {
    auto all = writes;
    std::sort(all.begin(), all.end());
    return all;
  }
  std::map<std::int64_t, expected_write> last;
  for (const auto& w : writes)
    last[w.key] = w;
  std::vector<expected_write> out;
  for (const auto& [k, w] : last)
    out.push_back(w);
  return out;
}

inline std::string show(const std::vector<expected_write>& rows) {
  std::string s = "{";
  for (const auto& r : rows)
    s += (s.size() > 1 ? ", " : "") + std::string("key ") + std::to_string(r.key) + " @" +
         std::to_string(r.offset);
  return s + "}";
}

/// Compares the fixture's rows with `want`; a row must also be the row its event makes.
template <class F>
void expect_rows(F& f, const std::vector<expected_write>& want, const std::string& when,
                 const fail_fn& fail) {
  using traits = fixture_traits<F>;
  std::vector<expected_write> got;
  for (const auto& r : f.rows()) {
    const auto match = std::find_if(want.begin(), want.end(), [&](const expected_write& w) {
      return w.key == r.key && w.offset == r.source_offset.value();
    });
    if (match == want.end()) {
      got.push_back(expected_write{r.key, r.source_offset.value(), -1});
      continue;
    }
    got.push_back(*match);
    if (!(r.row == traits::row_of(F::make_event(match->key, match->seq))))
      fail(when + ": the row of key " + std::to_string(r.key) + " @" +
           std::to_string(match->offset) + " is not the row its record makes");
  }
  std::sort(got.begin(), got.end());
  if (got != want)
    fail(when + ": the sink holds " + show(got) + ", expected " + show(want));
}

/// Runs `body` as one scenario of check `c`; an exception it lets out is a failure.
template <class Body>
void scenario(check_report& c, const std::string& name, Body&& body) {
  ++c.scenarios;
  const fail_fn fail = [&c, &name](const std::string& what) { c.fail(name + ": " + what); };
  try {
    body(fail);
  } catch (...) {
    fail("unexpected exception: " + describe(std::current_exception()));
  }
}

/// Applies `e` (the kit's event (key, seq)) at `o`; returns what the sink reported, if it does.
template <class F>
std::optional<write_outcome> apply_event(F& f, std::int64_t o, std::int64_t key, std::int64_t seq) {
  using traits = fixture_traits<F>;
  auto& s = f.sink();
  const auto row = traits::row_of(F::make_event(key, seq));
  using part = commit_order::detail::sink_part<false, std::remove_reference_t<decltype(s)>>;
  if constexpr (std::is_same_v<decltype(part::apply(s, partition_id{0}, offset{o}, row)),
                               write_outcome>) {
    return part::apply(s, partition_id{0}, offset{o}, row);
  } else {
    part::apply(s, partition_id{0}, offset{o}, row);
    return std::nullopt;
  }
}

inline std::string outcome_name(std::optional<write_outcome> o) {
  if (!o)
    return "nothing";
  return *o == write_outcome::applied ? "applied" : "absorbed";
}

template <class F>
void check_idempotent(report& r) {
  using sink_t = typename F::sink_type;
  constexpr bool transactional = has_capability_v<sink_t, Transactional>;
  check_report& c = r.add("Idempotent: a replay rewrites its row, never adds one");
  scenario(c, "replayed outside a transaction and after reopening", [](const fail_fn& fail) {
    F f;
    const std::vector<expected_write> want{{0, 0, 0}, {1, 1, 0}};
    apply_event(f, 0, 0, 0);
    apply_event(f, 1, 1, 0);
    apply_event(f, 0, 0, 0);
    apply_event(f, 1, 1, 0);
    expect_rows(f, want, "after replaying both records", fail);
    f.close();
    apply_event(f, 0, 0, 0);
    expect_rows(f, want, "after reopening and replaying again", fail);
  });
  if constexpr (transactional) {
    scenario(c, "replayed inside one transaction", [](const fail_fn& fail) {
      F f;
      auto& s = f.sink();
      s.begin();
      apply_event(f, 0, 0, 0);
      apply_event(f, 0, 0, 0);
      apply_event(f, 1, 1, 0);
      apply_event(f, 1, 1, 0);
      s.commit();
      const std::vector<expected_write> want{{0, 0, 0}, {1, 1, 0}};
      expect_rows(f, want, "after the commit", fail);
      f.close();
      expect_rows(f, want, "after reopening", fail);
    });
  }
}

template <class F>
void check_offset_guarded(report& r) {
  using sink_t = typename F::sink_type;
  constexpr bool transactional = has_capability_v<sink_t, Transactional>;
  check_report& c = r.add("OffsetGuarded: an older offset never replaces a newer row");
  auto expect_outcome = [](const fail_fn& fail, std::optional<write_outcome> got,
                           write_outcome want, const std::string& what) {
    if (got && *got != want)
      fail(what + " was reported " + outcome_name(got) + ", expected " + outcome_name(want));
  };
  scenario(c, "older and equal offsets, outside a transaction and after reopening",
           [&](const fail_fn& fail) {
             F f;
             expect_outcome(fail, apply_event(f, 5, 0, 2), write_outcome::applied,
                            "the first write (offset 5)");
             expect_outcome(fail, apply_event(f, 3, 0, 1), write_outcome::absorbed,
                            "an older offset (3 after 5)");
             expect_rows(f, {{0, 5, 2}}, "after an older offset", fail);
             expect_outcome(fail, apply_event(f, 5, 0, 2), write_outcome::absorbed,
                            "the same offset again (5)");
             expect_rows(f, {{0, 5, 2}}, "after the same offset again", fail);
             f.close();
             expect_outcome(fail, apply_event(f, 4, 0, 1), write_outcome::absorbed,
                            "an older offset after reopening (4 after 5)");
             expect_rows(f, {{0, 5, 2}}, "after reopening and an older offset", fail);
             expect_outcome(fail, apply_event(f, 7, 0, 3), write_outcome::applied,
                            "a newer offset (7 after 5)");
             expect_outcome(fail, apply_event(f, 6, 1, 0), write_outcome::applied,
                            "another key's first write (offset 6)");
             expect_rows(f, {{0, 7, 3}, {1, 6, 0}}, "after newer offsets", fail);
           });
  if constexpr (transactional) {
    scenario(c, "an older offset inside a transaction", [&](const fail_fn& fail) {
      F f;
      apply_event(f, 5, 0, 2);
      auto& s = f.sink();
      s.begin();
      expect_outcome(fail, apply_event(f, 3, 0, 1), write_outcome::absorbed,
                     "an older offset in a transaction (3 after 5)");
      expect_outcome(fail, apply_event(f, 8, 1, 0), write_outcome::applied,
                     "a new key in the transaction (offset 8)");
      s.commit();
      expect_rows(f, {{0, 5, 2}, {1, 8, 0}}, "after the commit", fail);
      f.close();
      expect_rows(f, {{0, 5, 2}, {1, 8, 0}}, "after reopening", fail);
    });
  }
}

template <class F>
void check_transactional(report& r) {
  using sink_t = typename F::sink_type;
  constexpr bool keyed = has_capability_v<sink_t, Idempotent>;
  check_report& c = r.add("Transactional: a rollback is discarded, a commit survives reopening");
  auto expect_position = [](const fail_fn& fail, F& f, std::optional<position> want,
                            const std::string& when) {
    const std::optional<position> got = f.sink().load_position();
    if (got != want)
      fail(when + ": load_position() is " +
           (got ? std::to_string(got->value()) : std::string("none")) + ", expected " +
           (want ? std::to_string(want->value()) : std::string("none")));
  };
  scenario(c, "rollback of a first transaction", [&](const fail_fn& fail) {
    F f;
    auto& s = f.sink();
    s.begin();
    apply_event(f, 0, 0, 0);
    apply_event(f, 1, 1, 0);
    commit_order::detail::partition_zero_of(s).store_position(partition_id{0}, position{2});
    s.rollback();
    expect_rows(f, {}, "after the rollback", fail);
    expect_position(fail, f, std::nullopt, "after the rollback");
    f.close();
    expect_rows(f, {}, "after reopening", fail);
    expect_position(fail, f, std::nullopt, "after reopening");
  });
  scenario(c, "commit, reopen, rollback, commit", [&](const fail_fn& fail) {
    F f;
    std::vector<expected_write> writes{{0, 0, 0}, {1, 1, 0}};
    {
      auto& s = f.sink();
      s.begin();
      apply_event(f, 0, 0, 0);
      apply_event(f, 1, 1, 0);
      commit_order::detail::partition_zero_of(s).store_position(partition_id{0}, position{2});
      s.commit();
    }
    expect_rows(f, rows_left_by(writes, keyed), "after the commit", fail);
    expect_position(fail, f, position{2}, "after the commit");
    f.close();
    expect_rows(f, rows_left_by(writes, keyed), "after reopening", fail);
    expect_position(fail, f, position{2}, "after reopening");
    {
      // The rollback must restore the committed rows, not the empty table nor the new ones.
      auto& s = f.sink();
      s.begin();
      apply_event(f, 2, 0, 1);
      apply_event(f, 3, 2, 0);
      commit_order::detail::partition_zero_of(s).store_position(partition_id{0}, position{4});
      s.rollback();
    }
    expect_rows(f, rows_left_by(writes, keyed), "after rolling back a second transaction", fail);
    expect_position(fail, f, position{2}, "after rolling back a second transaction");
    {
      auto& s = f.sink();
      s.begin();
      apply_event(f, 2, 0, 1);
      commit_order::detail::partition_zero_of(s).store_position(partition_id{0}, position{3});
      s.commit();
    }
    writes.push_back({0, 2, 1});
    expect_rows(f, rows_left_by(writes, keyed), "after a commit that follows a rollback", fail);
    expect_position(fail, f, position{3}, "after a commit that follows a rollback");
    f.close();
    expect_rows(f, rows_left_by(writes, keyed), "after reopening again", fail);
    expect_position(fail, f, position{3}, "after reopening again");
  });
}

template <class F>
void check_store(report& r) {
  check_report& c = r.add("position store: nothing before the first commit, each commit survives");
  scenario(c, "commits and reopening", [](const fail_fn& fail) {
    F f;
    auto show = [](std::optional<position> p) {
      return p ? std::to_string(p->value()) : std::string("none");
    };
    if (const auto p = f.store().load(); p)
      fail("a fresh store holds position " + show(p) + ", expected none");
    // Each commit, then a crash: 7 twice is an idle commit trigger, 5 a position that goes back
    // (a consumer that reset its position on purpose: the store keeps what it is told).
    for (const std::int64_t want : {3, 7, 7, 5}) {
      commit_order::detail::partition_zero_store_of(f.store()).commit(partition_id{0},
                                                                      position{want});
      if (const auto p = f.store().load(); p != position{want})
        fail("after commit(" + std::to_string(want) + ") the store holds " + show(p));
      f.close();
      if (const auto p = f.store().load(); p != position{want})
        fail("after commit(" + std::to_string(want) + ") and reopening the store holds " + show(p));
    }
  });
}

template <class F>
void check_retention(report& r, const conformance_options& o) {
  using traits = fixture_traits<F>;
  check_report& c = r.add("retention: a lagging reader gets position_lost, never a jump");
  const std::int64_t n = std::max<std::int64_t>(o.matrix_records, 8);
  const auto s = make_stream<F>(n, o.matrix_keys, 1);
  auto show_lost = [](const position_lost& e) {
    return "position_lost{" + std::to_string(e.stored().value()) + ", " +
           std::to_string(e.earliest().value()) + "}";
  };

  scenario(c, "a reader overtaken by retention", [&](const fail_fn& fail) {
    F f;
    f.create_log(std::span<const typename traits::event_type>(s.events));
    auto& src = f.source();
    if (src.earliest() != position{0} || src.end() != position{n}) {
      fail("after create_log of " + std::to_string(n) + " records the source spans [" +
           std::to_string(src.earliest().value()) + ", " + std::to_string(src.end().value()) + ")");
      return;
    }
    src.seek(position{0});
    {
      auto batch = src.poll(1);
      if (std::ranges::size(batch) != 1 || offset_of(*std::ranges::begin(batch)) != offset{0} ||
          !(event_of(*std::ranges::begin(batch)) == s.events[0])) {
        fail("poll(1) from 0 did not return record 0");
        return;
      }
    }
    f.truncate_before(position{n - 1});
    auto& after = f.source();
    const position earliest = after.earliest();
    if (earliest <= position{1}) {
      fail("truncate_before(" + std::to_string(n - 1) + ") left earliest() at " +
           std::to_string(earliest.value()) +
           ": retention must be able to overtake a reader (configure the fixture's source so it "
           "can, e.g. small segments)");
      return;
    }
    if (after.end() != position{n})
      fail("retention moved end() to " + std::to_string(after.end().value()));
    for (int attempt = 1; attempt <= 2; ++attempt) {
      try {
        auto batch = after.poll(4);
        const auto k = std::ranges::size(batch);
        fail("poll " + std::to_string(attempt) + " after retention returned " + std::to_string(k) +
             " records" +
             (k == 0 ? std::string(" (an empty read)")
                     : " from offset " +
                           std::to_string(offset_of(*std::ranges::begin(batch)).value()) +
                           " (a jump over [1, " + std::to_string(earliest.value()) + "))"));
      } catch (const position_lost& e) {
        if (e.stored() != position{1} || e.earliest() != earliest)
          fail("poll " + std::to_string(attempt) + " after retention raised " + show_lost(e) +
               ", expected position_lost{1, " + std::to_string(earliest.value()) + "}");
      }
    }
    try {
      after.seek(position{0});
      fail("seek(0) below earliest " + std::to_string(earliest.value()) + " succeeded");
    } catch (const position_lost& e) {
      if (e.stored() != position{0} || e.earliest() != earliest)
        fail("seek(0) raised " + show_lost(e));
    }
    after.seek(earliest);
    auto batch = after.poll(1);
    const auto i = static_cast<std::size_t>(earliest.value());
    if (std::ranges::size(batch) != 1 ||
        offset_of(*std::ranges::begin(batch)) != offset{earliest.value()} ||
        !(event_of(*std::ranges::begin(batch)) == s.events[i]))
      fail("after seek(earliest) poll(1) did not return record " +
           std::to_string(earliest.value()));
  });

  // The same through a pipeline: a stored position below earliest() after a restart.
  bool ran = false;
  for_each_type(type_list<AtLeastOnce<EveryBatch>, AtMostOnce<EveryBatch>,
                          TransactionalPosition<EveryBatch>>{},
                [&]<class P>(std::type_identity<P>) {
                  if constexpr (pipeline_for<F, P>::legal) {
                    if (ran)
                      return;
                    ran = true;
                    scenario(
                        c, "a stored position overtaken by retention, " + policy_name<P>(),
                        [&](const fail_fn& fail) {
                          world<F> w(s);
                          {
                            recording_sink<typename F::sink_type> sink(w.fixture.sink(), w.j);
                            auto p = w.template make<P, stop>(sink, settings{.batch_size = 1});
                            p.recover();
                            p.poll_once();
                          }
                          const auto stored = w.template stored<P>();
                          if (stored != position{1}) {
                            fail("one unit of one record stored " +
                                 (stored ? std::to_string(stored->value()) : std::string("none")));
                            return;
                          }
                          w.fixture.close();
                          w.fixture.truncate_before(position{n - 1});
                          const position earliest = w.fixture.source().earliest();
                          w.fixture.close();
                          recording_sink<typename F::sink_type> sink(w.fixture.sink(), w.j);
                          auto p = w.template make<P, stop>(sink, settings{.batch_size = 1});
                          for (int attempt = 1; attempt <= 2; ++attempt) {
                            try {
                              if (attempt == 1)
                                p.recover();
                              else
                                p.poll_once();
                              fail(std::string(attempt == 1 ? "recover()" : "poll_once()") +
                                   " with the stored position 1 below earliest " +
                                   std::to_string(earliest.value()) + " did not fail");
                            } catch (const position_lost& e) {
                              if (e.stored() != position{1} || e.earliest() != earliest)
                                fail("the restart raised " + show_lost(e));
                            }
                          }
                        });
                  }
                });
  if (!ran)
    c.note("no policy legal over these parts to try a stored position");
}

}  // namespace detail

/// Checks, by behaviour, every capability fixture F's parts declare (Synced excepted: see
/// check_synced), and adds one entry per capability to `r`.
template <single_partition_fixture F>
void check_capabilities(report& r, const conformance_options& o = {}) {
  using traits = fixture_traits<F>;
  using sink_t = typename traits::sink_type;
  if constexpr (has_capability_v<sink_t, Idempotent>)
    detail::check_idempotent<F>(r);
  else
    r.not_run.push_back("Idempotent: not declared by the sink");
  if constexpr (has_capability_v<sink_t, OffsetGuarded>)
    detail::check_offset_guarded<F>(r);
  else
    r.not_run.push_back("OffsetGuarded: not declared by the sink");
  if constexpr (has_capability_v<sink_t, Transactional> &&
                (transactional_sink<sink_t> || partitioned_transactional_sink<sink_t>))
    detail::check_transactional<F>(r);
  else
    r.not_run.push_back("Transactional: not declared by the sink");
  if constexpr (traits::has_store)
    detail::check_store<F>(r);
  else
    r.not_run.push_back("position store: the fixture has none");
  if constexpr (traits::source_is_stand_in)
    r.not_run.push_back("retention: the source is a stand-in, not under test");
  else if constexpr (traits::has_retention)
    detail::check_retention<F>(r, o);
  else
    r.not_run.push_back("retention: the fixture offers no truncate_before (no retention)");
}

}  // namespace commit_order::testing
