// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory.hpp — the testing kit: an in-memory log, table and position
// store, for tests, benchmarks and documentation.
#pragma once

#include "commit_order/adapters/memory/dead_letters.hpp"
#include "commit_order/adapters/memory/forwarding_sink.hpp"
#include "commit_order/adapters/memory/log.hpp"
#include "commit_order/adapters/memory/manual_executor.hpp"
#include "commit_order/adapters/memory/position_store.hpp"
#include "commit_order/adapters/memory/synchronized.hpp"
#include "commit_order/adapters/memory/table.hpp"
