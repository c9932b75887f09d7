// SPDX-License-Identifier: BSL-1.0
// commit_order/executor.hpp — what a pipeline needs to hand its writes to an executor
// (`with_executor<E>`): the completion tracking, the shared state the workers report to and the
// loop's executor path.
//
// Not part of the umbrella header, so that a synchronous pipeline does not pay for locks,
// condition variables and tasks it never uses. thread_pool.hpp and the testing kit's
// memory/manual_executor.hpp include it; include it yourself for an executor of your own (a
// pipeline with an executor and without this header is refused with a message saying so).
#pragma once

#include "commit_order/completion_tracker.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/detail/async_path.hpp"
#include "commit_order/options.hpp"
