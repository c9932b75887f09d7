// SPDX-License-Identifier: BSL-1.0
// One variant of the overhead benchmark in a translation unit of its own (overhead_loops.hpp
// says why): the library's loop: `pipeline<...>::poll_once`.
#include "overhead_loops.hpp"

namespace overhead {
template struct pipeline_case<co::AtMostOnce<>>;
template struct pipeline_case<co::AtLeastOnce<>>;
template struct pipeline_case<co::TransactionalPosition<>>;
}  // namespace overhead
