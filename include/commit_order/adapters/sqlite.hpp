// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite.hpp — the SQLite adapter: typed table descriptions, guarded
// upsert / upsert / append sinks with the position in the same transaction, and a position
// store. Links libsqlite3: target commit_order::sqlite.
#pragma once

#include "commit_order/adapters/sqlite/connection.hpp"
#include "commit_order/adapters/sqlite/position_store.hpp"
#include "commit_order/adapters/sqlite/position_table.hpp"
#include "commit_order/adapters/sqlite/sink.hpp"
#include "commit_order/adapters/sqlite/table.hpp"
