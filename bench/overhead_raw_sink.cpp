// SPDX-License-Identifier: BSL-1.0
// One variant of the overhead benchmark in a translation unit of its own (overhead_loops.hpp
// says why): the floor: the sink's writes alone.
#include "overhead_loops.hpp"

namespace overhead {
template struct raw_sink_case<co::AtMostOnce<>>;
template struct raw_sink_case<co::AtLeastOnce<>>;
template struct raw_sink_case<co::TransactionalPosition<>>;
}  // namespace overhead
