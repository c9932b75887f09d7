// SPDX-License-Identifier: BSL-1.0
// One variant of the overhead benchmark in a translation unit of its own (overhead_loops.hpp
// says why): the hand-written twin, its parts its own members.
#include "overhead_loops.hpp"

namespace overhead {
template struct handwritten_loop<co::AtMostOnce<>, parts::owned>;
template struct handwritten_loop<co::AtLeastOnce<>, parts::owned>;
template struct handwritten_loop<co::TransactionalPosition<>, parts::owned>;
}  // namespace overhead
