// SPDX-License-Identifier: BSL-1.0
// The event every conformance fixture here feeds its adapter, and the crash tests feed the
// memory parts: a key and the key's sequence number (the kit's make_event). The SQLite table
// that holds it is in kit_rows.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include <commit_order/key.hpp>

namespace conformance {

/// Trivially copyable and padding-free, so the file log's trivial_codec can frame it.
struct kit_event {
  std::int64_t key = 0;
  std::int64_t seq = 0;
  friend bool operator==(const kit_event&, const kit_event&) = default;
};
static_assert(std::is_trivially_copyable_v<kit_event> && sizeof(kit_event) == 16);

using kit_key = commit_order::key<&kit_event::key>;

}  // namespace conformance
