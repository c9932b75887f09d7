// commit_order/errors.hpp — the failures the pipeline reports instead of hiding.
#pragma once

#include <stdexcept>
#include <string>

#include "commit_order/offset.hpp"

namespace commit_order {

/// Base of every error the library throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The stored position points at records the source no longer retains. Reading from the
/// earliest retained record instead would silently lose everything in between.
class position_lost final : public error {
 public:
  position_lost(position stored, position earliest)
      : error("commit_order: position lost: the stored position is " +
              std::to_string(stored.value()) + " but the source's earliest retained record is " +
              std::to_string(earliest.value()) + "; records [" + std::to_string(stored.value()) +
              ", " + std::to_string(earliest.value()) +
              ") were deleted by retention before they were applied")
      , stored_(stored)
      , earliest_(earliest) {}

  [[nodiscard]] position stored() const noexcept { return stored_; }
  [[nodiscard]] position earliest() const noexcept { return earliest_; }

 private:
  position stored_;
  position earliest_;
};

/// The stored position lies past the end of the source: the position belongs to another
/// stream, or the source lost data it had acknowledged.
class position_beyond_end final : public error {
 public:
  position_beyond_end(position stored, position end)
      : error("commit_order: the stored position " + std::to_string(stored.value()) +
              " is beyond the source's end " + std::to_string(end.value()) +
              "; the position belongs to another stream or the source lost acknowledged records")
      , stored_(stored)
      , end_(end) {}

  [[nodiscard]] position stored() const noexcept { return stored_; }
  [[nodiscard]] position end() const noexcept { return end_; }

 private:
  position stored_;
  position end_;
};

}  // namespace commit_order
