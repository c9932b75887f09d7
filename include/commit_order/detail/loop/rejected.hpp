// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/loop/rejected.hpp — the stand-in for an illegal pipeline's loop (private).
//
// `pipeline` stands on it when a rule fails, so that rule's static_assert is the only error.
#pragma once

#include <cstddef>
#include <vector>

#include "commit_order/offset.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/progress.hpp"
#include "commit_order/steps.hpp"

namespace commit_order::detail {

namespace surface {
template <class P>
struct policy_view {
  using steps = step_list<>;
  using guarantee = MayLoseAndDuplicate;
};
template <policy P>
struct policy_view<P> {
  using steps = effective_steps_t<P>;
  using guarantee = guarantee_t<P>;
};
}  // namespace surface

/// Stands in for the loop of an illegal pipeline, so the rule's static_assert is the only
/// error: it accepts any constructor arguments and offers the whole public surface of
/// `pipeline_impl` (checked by tests/compile_fail/cases/rejected_surface.cpp).
template <class Config>
class rejected_pipeline {
 public:
  using source_type = typename Config::source_type;
  using sink_type = typename Config::sink_type;
  using policy_type = typename Config::policy_type;
  using store_type = typename Config::store_type;
  using observer_type = typename Config::observer_type;
  using faults_type = typename Config::faults_type;
  using dead_letters_type = typename Config::dead_letters_type;
  using executor_type = typename Config::executor_type;
  using steps = typename surface::policy_view<policy_type>::steps;
  using guarantee = typename surface::policy_view<policy_type>::guarantee;

  template <class... Args>
  explicit rejected_pipeline(Args&&...) {}
  position recover() { return position{}; }
  std::size_t poll_once() { return 0; }
  std::size_t run() { return 0; }
  [[nodiscard]] position read_position(partition_id = partition_id{0}) const { return {}; }
  [[nodiscard]] position committed_position(partition_id = partition_id{0}) const { return {}; }
  [[nodiscard]] commit_order::progress progress(partition_id = partition_id{0}) const { return {}; }
  [[nodiscard]] std::vector<commit_order::progress> partitions() const { return {}; }
  [[nodiscard]] std::size_t refused_commits() const noexcept { return 0; }
  [[nodiscard]] observer_type& observer() noexcept { return observer_; }
  [[nodiscard]] const observer_type& observer() const noexcept { return observer_; }
  [[nodiscard]] faults_type& faults() noexcept { return faults_; }

 private:
  [[no_unique_address]] observer_type observer_{};
  [[no_unique_address]] faults_type faults_{};
};

}  // namespace commit_order::detail
