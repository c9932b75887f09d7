// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/file.hpp — the file adapter: an append-only segmented log (a source)
// and an atomically replaced position file (a position store). Links zlib (CRC-32):
// target commit_order::file.
#pragma once

// First: a part's failed check (part_rules) is then reported under a short chain of includes.
#include "commit_order/part_checks.hpp"

#include "commit_order/adapters/file/codec.hpp"
#include "commit_order/adapters/file/errors.hpp"
#include "commit_order/adapters/file/log.hpp"
#include "commit_order/adapters/file/position_store.hpp"
