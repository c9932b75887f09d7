// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory.hpp — the testing kit: an in-memory log (one partition, or a
// topic of several), table, position store and consumer group coordinator, for tests,
// benchmarks and documentation.
#pragma once

#include "commit_order/adapters/memory/dead_letters.hpp"
#include "commit_order/adapters/memory/forwarding_sink.hpp"
#include "commit_order/adapters/memory/group.hpp"
#include "commit_order/adapters/memory/log.hpp"
#include "commit_order/adapters/memory/manual_executor.hpp"
#include "commit_order/adapters/memory/partitioned_log.hpp"
#include "commit_order/adapters/memory/position_store.hpp"
#include "commit_order/adapters/memory/synchronized.hpp"
#include "commit_order/adapters/memory/table.hpp"
