// SPDX-License-Identifier: BSL-1.0
// FL3: a file log given a durability tag where its sync policy goes: the log decides how it
// syncs from a policy, not from the level it should reach. The twin names the policy.
#include <commit_order/adapters/file.hpp>
#include <commit_order/capabilities.hpp>

#include <cstdint>

namespace co = commit_order;

struct tick {
  std::int64_t at = 0;
};

#ifdef COMMIT_ORDER_COMPILE_FAIL
using tick_log = co::file::log<tick, co::file::trivial_codec<tick>, co::Synced>;
#else
using tick_log = co::file::log<tick, co::file::trivial_codec<tick>, co::file::sync_each_append>;
#endif

void record(tick_log& log, std::int64_t at) {
  log.append(tick{at});
}
