// SPDX-License-Identifier: BSL-1.0
// commit_order/faults.hpp — stopping a pipeline at a chosen point, to prove what a crash there
// leaves behind.
//
// With `with_faults<F>`, the pipeline calls `f.at(const fault_point&)` at every step boundary
// of every unit and after every row of a write. An injector that wants a crash throws
// `injected_crash`, which no error handling catches: like a killed process, the pipeline gets
// no chance to commit anything. (An open sink transaction is rolled back, as the database
// would discard it.) The default, `no_faults`, is never called: it compiles to nothing.
#pragma once

#include <cstddef>

#include "commit_order/offset.hpp"
#include "commit_order/steps.hpp"

namespace commit_order {

struct fault_point final {
  enum class kind {
    after_step,  ///< the step `step` (index `step_index` in the executed list) just completed
    after_row,   ///< `row` rows of the unit's write have been applied
  };
  kind where = kind::after_step;
  step_kind step = step_kind::poll;
  std::size_t step_index = 0;
  std::size_t row = 0;
  position unit_end{};   ///< the position the unit will commit
  std::size_t unit = 0;  ///< units started by this pipeline so far (0-based)
};

/// Thrown by an injector to simulate a crash. Deliberately not a std::exception: nothing in
/// the pipeline that handles record failures may catch it.
struct injected_crash final {
  fault_point at;
};

/// The default: it has no `at`, so the pipeline never calls it.
struct no_faults final {};

/// An injector that crashes at the n-th fault point it sees (0-based) and counts the rest.
struct crash_at_nth final {
  std::size_t crash_at = static_cast<std::size_t>(-1);
  std::size_t seen = 0;
  void at(const fault_point& p) {
    if (seen++ == crash_at)
      throw injected_crash{p};
  }
};

}  // namespace commit_order
