// commit_order/progress.hpp — progress is not position.
//
// The committed position measures intent; the sink's applied watermark (the highest source
// offset present in the sink) measures what was applied. They differ by the in-flight unit,
// and a healthy pipeline's "lag" oscillates by a batch if only the position is watched. Report
// both: records not yet read, and records not yet applied.
#pragma once

#include <cstdint>
#include <optional>

#include "commit_order/offset.hpp"

namespace commit_order {

struct progress final {
  position read{};                          ///< where the next poll reads
  position committed{};                     ///< the last durable position
  std::optional<offset> applied_watermark;  ///< highest source offset in the sink, if it says
  position source_end{};                    ///< just past the source's last record
  partition_id partition{};                 ///< the partition these figures are of

  /// Records the consumer has not read yet.
  [[nodiscard]] constexpr std::int64_t unread() const noexcept { return source_end - read; }
  /// Records read but not yet covered by a durable position.
  [[nodiscard]] constexpr std::int64_t uncommitted() const noexcept { return read - committed; }
  /// Records past the sink's applied watermark (all of them when the sink holds none); empty
  /// when the sink cannot report a watermark.
  [[nodiscard]] constexpr std::optional<std::int64_t> unapplied(position earliest = position{
                                                                    0}) const noexcept {
    if (!applied_watermark)
      return source_end - earliest;
    return source_end - position::after(*applied_watermark);
  }
};

}  // namespace commit_order
