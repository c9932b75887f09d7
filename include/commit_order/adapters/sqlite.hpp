// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite.hpp — the SQLite adapter: typed table descriptions, guarded
// (partition-scoped or version) upsert / upsert / append sinks with the positions of every
// partition in the same transaction, a position store, and the operator's tools (stream_admin,
// the migration of a database written before partitions). Links libsqlite3: target
// commit_order::sqlite.
#pragma once

// First: a part's failed check (part_rules) is then reported under a short chain of includes.
#include "commit_order/part_checks.hpp"

#include "commit_order/adapters/sqlite/admin.hpp"
#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/layout.hpp"
#include "commit_order/adapters/sqlite/position_store.hpp"
#include "commit_order/adapters/sqlite/position_table.hpp"
#include "commit_order/adapters/sqlite/sink.hpp"
#include "commit_order/adapters/sqlite/table.hpp"
