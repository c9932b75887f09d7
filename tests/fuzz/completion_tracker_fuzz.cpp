// SPDX-License-Identifier: BSL-1.0
// libFuzzer target: the completion tracker against its trivial model. Each input byte is an
// operation — start the next offset (with a gap taken from the byte), or complete one of the
// records in flight — and after every operation the tracker's committable position and
// in-flight count must equal the model's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <commit_order/completion_tracker.hpp>

#include "support/tracker_model.hpp"

namespace co = commit_order;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  test_support::tracker_model model;
  model.start = co::position{data[0]};
  co::completion_tracker tracker(model.start);
  std::int64_t next = model.start.value();
  std::vector<std::int64_t> running;
  for (std::size_t i = 1; i < size; ++i) {
    const std::uint8_t op = data[i];
    if ((op & 1) == 0 || running.empty()) {
      next += 1 + (op >> 5);  // gaps of 0..7 offsets, as a compacted log has
      tracker.start(co::offset{next});
      model.started.insert(next);
      running.push_back(next);
    } else {
      const std::size_t k = (op >> 1) % running.size();
      const std::int64_t o = running[k];
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
      tracker.complete(co::offset{o});
      model.completed.insert(o);
    }
    if (tracker.committable() != model.committable() || tracker.in_flight() != running.size()) {
      std::abort();
    }
  }
  return 0;
}
