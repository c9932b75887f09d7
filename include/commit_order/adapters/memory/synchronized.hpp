// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/synchronized.hpp — a sink made safe for concurrent writes.
//
// Part of the testing kit: wraps a sink (owned, built from the constructor's arguments) so that
// every call the pipeline makes — `apply`, and the transaction, position, watermark and limit
// calls the wrapped sink has — runs under one mutex, one call at a time, and declares
// `Concurrent` on top of the wrapped sink's capabilities: what writes handed to an executor need
// (rule R13). Everything else about the wrapped sink is passed on as it is (forwarding_sink), so
// a Transactional sink stays one that begins, commits and keeps the position: a pipeline that
// also hands its writes to an executor is refused for the real reason (rule R14, a transaction
// cannot span threads), not for a shape the wrapper lost.
#pragma once

#include <mutex>
#include <utility>

#include "commit_order/adapters/memory/forwarding_sink.hpp"
#include "commit_order/capabilities.hpp"

namespace commit_order::memory {

namespace detail {
template <class Caps>
struct add_concurrent;
template <class... Tags>
struct add_concurrent<capabilities<Tags...>> {
  using type = capabilities<Tags..., Concurrent>;
};

/// Runs each forwarded call under one mutex.
class one_mutex final {
 public:
  template <class F>
  decltype(auto) operator()(F&& call) const {
    std::lock_guard lock(mutex_);
    return std::forward<F>(call)();
  }

 private:
  mutable std::mutex mutex_;
};
}  // namespace detail

template <class Sink>
class synchronized final : public forwarding_sink<Sink, detail::one_mutex> {
 public:
  using capabilities = typename detail::add_concurrent<capabilities_of_t<Sink>>::type;
  using forwarding_sink<Sink, detail::one_mutex>::forwarding_sink;
};

}  // namespace commit_order::memory
