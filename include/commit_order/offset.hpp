// commit_order/offset.hpp — strong types for partitions, source offsets, positions and owner
// epochs.
//
// An *offset* names one record of one stream partition. A *position* names the next record
// to read: having applied offset n, a consumer's position is n + 1 (Kafka's convention).
// Keeping the two apart in the type system prevents the classic off-by-one that either
// re-reads the last applied record forever or skips the first unread one. A `partition_id`
// names the partition both belong to.
#pragma once

#include <compare>
#include <cstdint>
#include <ostream>

namespace commit_order {

/// The offset of one record within one stream partition.
class offset final {
 public:
  using value_type = std::int64_t;

  constexpr offset() noexcept = default;
  constexpr explicit offset(value_type v) noexcept : value_(v) {}

  [[nodiscard]] constexpr value_type value() const noexcept { return value_; }

  friend constexpr auto operator<=>(offset, offset) noexcept = default;

  template <class Char, class Traits>
  friend std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os,
                                                      offset o) {
    return os << o.value_;
  }

 private:
  value_type value_ = 0;
};

/// The offset of the next record to read. A position never denotes "the last applied record".
class position final {
 public:
  using value_type = std::int64_t;

  constexpr position() noexcept = default;
  constexpr explicit position(value_type v) noexcept : value_(v) {}

  /// The position of a consumer that has applied `applied` and everything before it.
  [[nodiscard]] static constexpr position after(offset applied) noexcept {
    return position{applied.value() + 1};
  }
  /// The position whose next read is `next`.
  [[nodiscard]] static constexpr position at(offset next) noexcept {
    return position{next.value()};
  }

  /// The offset this position will read next.
  [[nodiscard]] constexpr offset next_offset() const noexcept { return offset{value_}; }
  [[nodiscard]] constexpr value_type value() const noexcept { return value_; }

  /// True when the record at `o` lies before this position, i.e. it counts as consumed.
  [[nodiscard]] constexpr bool covers(offset o) const noexcept { return o.value() < value_; }

  friend constexpr auto operator<=>(position, position) noexcept = default;

  /// Number of offsets between two positions (how many records `later` is ahead).
  friend constexpr value_type operator-(position later, position earlier) noexcept {
    return later.value_ - earlier.value_;
  }

  template <class Char, class Traits>
  friend std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os,
                                                      position p) {
    return os << p.value_;
  }

 private:
  value_type value_ = 0;
};

/// One partition of a stream (a topic's partition). The partition is the unit of ordering and
/// of position: offsets, positions and owner epochs are per partition, and offsets of different
/// partitions are never comparable.
class partition_id final {
 public:
  using value_type = std::int32_t;

  constexpr partition_id() noexcept = default;
  constexpr explicit partition_id(value_type v) noexcept : value_(v) {}

  [[nodiscard]] constexpr value_type value() const noexcept { return value_; }

  friend constexpr auto operator<=>(partition_id, partition_id) noexcept = default;

  template <class Char, class Traits>
  friend std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os,
                                                      partition_id p) {
    return os << p.value_;
  }

 private:
  value_type value_ = 0;
};

/// The generation of the owner of a partition's position. A consumer that took over a
/// partition holds a higher epoch than the one it replaced; a stale owner is fenced.
///
/// A consumer group's epoch is `of(era, generation)`: the group generation in the low 32 bits
/// and an era above it. The generation restarts when a group is deleted and recreated; the era
/// is the explicit, documented way out (bumped by an operator, never guessed), so the new
/// group's epochs rise above every epoch of the old one.
class epoch final {
 public:
  using value_type = std::int64_t;

  constexpr epoch() noexcept = default;
  constexpr explicit epoch(value_type v) noexcept : value_(v) {}

  /// The epoch of generation `generation` of a group in era `era`.
  [[nodiscard]] static constexpr epoch of(std::int64_t era, std::int32_t generation) noexcept {
    return epoch{(era << 32) | static_cast<std::int64_t>(static_cast<std::uint32_t>(generation))};
  }

  [[nodiscard]] constexpr value_type value() const noexcept { return value_; }
  [[nodiscard]] constexpr epoch next() const noexcept { return epoch{value_ + 1}; }
  [[nodiscard]] constexpr std::int64_t era() const noexcept { return value_ >> 32; }
  [[nodiscard]] constexpr std::int32_t generation() const noexcept {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(value_ & 0xffffffffLL));
  }

  friend constexpr auto operator<=>(epoch, epoch) noexcept = default;

  template <class Char, class Traits>
  friend std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os,
                                                      epoch e) {
    return os << e.value_;
  }

 private:
  value_type value_ = 0;
};

}  // namespace commit_order
