// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory.hpp — the testing kit: an in-memory log (one partition, or a
// topic of several), table, transactional log, position store and consumer group coordinator,
// for tests, benchmarks and documentation. Its concurrent parts are included on their own, like the
// thread pool, so that a synchronous test does not pay for locks and tasks:
// memory/manual_executor.hpp (with the executor path, commit_order/executor.hpp) and
// memory/synchronized.hpp.
#pragma once

// First: a part's failed check (part_rules) is then reported under a short chain of includes.
#include "commit_order/part_checks.hpp"

#include "commit_order/adapters/memory/dead_letters.hpp"
#include "commit_order/adapters/memory/forwarding_sink.hpp"
#include "commit_order/adapters/memory/group.hpp"
#include "commit_order/adapters/memory/log.hpp"
#include "commit_order/adapters/memory/partitioned_log.hpp"
#include "commit_order/adapters/memory/position_store.hpp"
#include "commit_order/adapters/memory/table.hpp"
#include "commit_order/adapters/memory/transactional_log.hpp"
