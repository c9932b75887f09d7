// commit_order/adapters/memory/synchronized.hpp — a sink made safe for concurrent writes.
//
// Part of the testing kit: wraps a sink so that `apply` may be called from several threads
// (one at a time, under a mutex) and declares `Concurrent` on top of the wrapped sink's
// capabilities — what writes handed to an executor need (rule R13).
#pragma once

#include <mutex>
#include <optional>
#include <utility>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/key.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

namespace detail {
template <class Caps>
struct add_concurrent;
template <class... Tags>
struct add_concurrent<capabilities<Tags...>> {
  using type = capabilities<Tags..., Concurrent>;
};
}  // namespace detail

template <class Sink>
class synchronized final {
 public:
  using row_type = typename Sink::row_type;
  using key_type = sink_key_t<Sink>;
  using capabilities = typename detail::add_concurrent<capabilities_of_t<Sink>>::type;

  template <class... Args>
  explicit synchronized(Args&&... args) : sink_{std::forward<Args>(args)...} {}

  decltype(auto) apply(offset o, const row_type& row) {
    std::lock_guard lock(mutex_);
    return sink_.apply(o, row);
  }
  decltype(auto) apply(partition_id k, offset o,
                       const row_type& row) requires partitioned_sink<Sink> {
    std::lock_guard lock(mutex_);
    return sink_.apply(k, o, row);
  }

  [[nodiscard]] std::optional<offset> applied_watermark() const requires watermarked_sink<Sink> {
    std::lock_guard lock(mutex_);
    return sink_.applied_watermark();
  }

  /// The wrapped sink, for inspection once no writes are in flight.
  [[nodiscard]] const Sink& inner() const noexcept { return sink_; }

 private:
  mutable std::mutex mutex_;
  Sink sink_;
};

}  // namespace commit_order::memory
