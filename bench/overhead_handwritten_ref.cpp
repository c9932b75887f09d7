// SPDX-License-Identifier: BSL-1.0
// One variant of the overhead benchmark in a translation unit of its own (overhead_loops.hpp
// says why): the hand-written twin, its parts reached through pointers.
#include "overhead_loops.hpp"

namespace overhead {
template struct handwritten_loop<co::AtMostOnce<>, parts::referenced>;
template struct handwritten_loop<co::AtLeastOnce<>, parts::referenced>;
template struct handwritten_loop<co::TransactionalPosition<>, parts::referenced>;
}  // namespace overhead
