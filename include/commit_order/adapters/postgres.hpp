// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/postgres.hpp — the PostgreSQL adapter: typed table descriptions,
// partition-scoped guarded upsert / version-guarded upsert / upsert / append sinks with the
// positions (per partition, fenced by owner epochs) in the same transaction, and a position
// store, and a dead-letter table. Links libpq: target commit_order::postgres.
#pragma once

// First: a part's failed check (part_rules) is then reported under a short chain of includes.
#include "commit_order/part_checks.hpp"

#include "commit_order/adapters/postgres/connection.hpp"
#include "commit_order/adapters/postgres/dead_letters.hpp"
#include "commit_order/adapters/postgres/position_store.hpp"
#include "commit_order/adapters/postgres/position_table.hpp"
#include "commit_order/adapters/postgres/sink.hpp"
#include "commit_order/adapters/postgres/table.hpp"
#include "commit_order/adapters/postgres/text.hpp"
