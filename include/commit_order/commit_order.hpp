// SPDX-License-Identifier: BSL-1.0
// commit_order/commit_order.hpp — the umbrella header: the vocabulary, the rules, the loop.
// Adapters are included separately (commit_order/adapters/<name>.hpp), as are the executor
// path (commit_order/executor.hpp, which `with_executor` needs; it brings completion_tracker.hpp)
// and the thread pool (commit_order/thread_pool.hpp), so that no translation unit pays for
// locks, tasks and <thread> unasked.
#pragma once

// First: a part's failed check (part_rules) is then reported under a short chain of includes.
#include "commit_order/part_checks.hpp"

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/faults.hpp"
#include "commit_order/guarantee.hpp"
#include "commit_order/key.hpp"
#include "commit_order/observer.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/options.hpp"
#include "commit_order/pipeline.hpp"
#include "commit_order/policy.hpp"
#include "commit_order/progress.hpp"
#include "commit_order/record.hpp"
#include "commit_order/rules.hpp"
#include "commit_order/steps.hpp"
