// SPDX-License-Identifier: BSL-1.0
// The stand-in for a rejected pipeline offers the whole public surface: code that uses every
// member of an illegal pipeline (as the README's quick start reads `guarantee`) gets the rule's
// one error and nothing after it. The twin is the same code on the legal configuration, so
// both use exactly the same members.
#include <commit_order/commit_order.hpp>

#include <cstddef>
#include <type_traits>

#include "fixtures.hpp"

using namespace cf;

#ifdef COMMIT_ORDER_COMPILE_FAIL
using sink_t = append_table;
#else
using sink_t = upsert_table;
#endif

using pipeline_t =
    co::pipeline<order_log, sink_t, co::AtLeastOnce<>, co::with_store<volatile_store>,
                 co::with_observer<co::counting_observer>>;

static_assert(std::is_same_v<pipeline_t::guarantee, co::MayDuplicate>);
static_assert(std::is_same_v<pipeline_t::source_type, order_log>);
static_assert(std::is_same_v<pipeline_t::sink_type, sink_t>);
static_assert(std::is_same_v<pipeline_t::policy_type, co::AtLeastOnce<>>);
static_assert(std::is_same_v<pipeline_t::store_type, volatile_store>);
static_assert(std::is_same_v<pipeline_t::observer_type, co::counting_observer>);
static_assert(std::is_same_v<pipeline_t::faults_type, co::no_faults>);
static_assert(std::is_same_v<pipeline_t::dead_letters_type, co::no_dead_letters>);
static_assert(std::is_same_v<pipeline_t::executor_type, co::no_executor>);
static_assert(pipeline_t::steps::size == 3);

std::size_t consume(order_log& log, sink_t& sink, volatile_store& store) {
  pipeline_t p(log, sink, store);
  const co::position start = p.recover();
  std::size_t n = p.poll_once() + p.run();
  const co::progress progress = p.progress();
  const pipeline_t& view = p;
  n += view.observer().rows_written + p.observer().polls;
  (void)p.faults();
  return n + static_cast<std::size_t>(start.value() + p.read_position().value() +
                                      p.committed_position().value() + progress.unread());
}
