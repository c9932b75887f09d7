// SPDX-License-Identifier: BSL-1.0
// A fault injector that crashes a pipeline right after one step of one unit, as a kill there
// would: the tests that show what a policy leaves behind at that moment share it.
#pragma once

#include <cstddef>

#include <commit_order/commit_order.hpp>

namespace test_support {

/// Crashes the pipeline right after step `step` of unit `unit` (0-based).
struct crash_after final {
  commit_order::step_kind step = commit_order::step_kind::poll;
  std::size_t unit = static_cast<std::size_t>(-1);
  void at(const commit_order::fault_point& p) {
    if (p.where == commit_order::fault_point::kind::after_step && p.step == step && p.unit == unit)
      throw commit_order::injected_crash{p};
  }
};

}  // namespace test_support
