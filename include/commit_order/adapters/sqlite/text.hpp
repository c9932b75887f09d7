// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/sqlite/text.hpp — building SQL text and messages in one allocation:
// the SQLite adapter's name for commit_order/detail/concat.hpp (which says why every string the
// adapters build goes through it).
#pragma once

#include "commit_order/detail/concat.hpp"

namespace commit_order::sqlite::detail {

using commit_order::detail::concat;

}  // namespace commit_order::sqlite::detail
