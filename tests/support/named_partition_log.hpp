// SPDX-License-Identifier: BSL-1.0
// A single-partition source whose records name the stream's partition they come from, as a
// Kafka partition_source's records name the topic's: to the pipeline it is still partition 0.
// Every per-partition step must treat its records as partition 0's (positions, fingerprints,
// completions), or the source's one partition silently stops being committed.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "support/orders.hpp"

namespace test_support {

class named_partition_log {
 public:
  using record_type = co::partitioned_logged<order_event>;
  using capabilities = order_log::capabilities;
  named_partition_log(order_log& log, co::partition_id named) : log_(&log), named_(named) {}
  void seek(co::position p) { log_->seek(p); }
  std::span<const record_type> poll(std::size_t max) {
    polled_.clear();
    for (const auto& r : log_->poll(max))
      polled_.push_back(record_type{named_, r.source_offset, r.event});
    return polled_;
  }
  co::position earliest() const noexcept { return log_->earliest(); }
  co::position end() const noexcept { return log_->end(); }

 private:
  order_log* log_;
  co::partition_id named_;
  std::vector<record_type> polled_;
};

}  // namespace test_support
