// SPDX-License-Identifier: BSL-1.0
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

/// One partition's figures, each counting one thing. With `read`, `committed` and the sink's
/// watermark in order on the source's offsets:
///
///     earliest ... applied watermark | ... read | ... source_end
///     unapplied = read - (watermark + 1)        unread = source_end - read
///     uncommitted = read - committed             (the position's lag behind the read)
///
/// where unapplied and uncommitted take `read` less the offsets at its end that hold no record
/// (records_end).
///
/// The records not yet in the sink are `unread() + *unapplied()`: the two never overlap.
struct progress final {
  position read{};       ///< where the next poll reads
  position committed{};  ///< the last durable position
  /// The highest source offset in the sink, if it says; where the policy makes the position
  /// durable only after the write (AtLeastOnce, TransactionalPosition), the offset before the
  /// committed position when that is higher: the position vouches for everything before it.
  std::optional<offset> applied_watermark;
  position source_end{};           ///< just past the source's last record
  partition_id partition{};        ///< the partition these figures are of
  bool reports_watermark = false;  ///< the sink reports an applied watermark
  /// Just past the last record read, when that is below `read`: the read position moved over
  /// offsets that hold no record (a transaction's markers, an aborted transaction's records),
  /// which neither `unapplied()` nor `uncommitted()` counts. Empty otherwise.
  std::optional<position> records_end{};

  /// Records the consumer has not read yet.
  [[nodiscard]] constexpr std::int64_t unread() const noexcept { return source_end - read; }
  /// Records read but not yet covered by a durable position.
  [[nodiscard]] constexpr std::int64_t uncommitted() const noexcept {
    const position through = records_end.value_or(read);
    return through > committed ? through - committed : 0;
  }
  /// Records read but not yet applied: between the sink's watermark and the read position
  /// (every record read since `earliest` while the sink holds none of this partition's rows;
  /// 0 when a replay reads again what the sink holds). Empty when the sink cannot report a
  /// watermark: then nothing says what was applied, and `uncommitted()` is the bound.
  [[nodiscard]] constexpr std::optional<std::int64_t> unapplied(position earliest = position{
                                                                    0}) const noexcept {
    if (!reports_watermark)
      return std::nullopt;
    const position applied_to = applied_watermark ? position::after(*applied_watermark) : earliest;
    const position through = records_end.value_or(read);
    return through > applied_to ? through - applied_to : 0;
  }
};

}  // namespace commit_order
