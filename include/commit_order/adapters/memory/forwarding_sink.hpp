// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/memory/forwarding_sink.hpp — the base of a sink that wraps another.
//
// Part of the testing kit. A wrapper that fails, counts, paces, journals or locks the writes of
// another sink must be, to the rules and the loop, exactly the sink it wraps: the same row and
// key types, the same capabilities, and every member the pipeline calls that the wrapped sink
// has — and none that it lacks. A wrapper that passes on `Transactional` but not begin() is
// refused by rule S7 with a message that blames its user; one that drops applied_watermark()
// silently skips recovery's invariant check; one that drops claim() stops fencing, and one that
// drops flush() commits positions past rows still in flight.
//
//   template <class Inner>
//   struct counting_sink : commit_order::memory::forwarding_sink<Inner&> {
//     using commit_order::memory::forwarding_sink<Inner&>::forwarding_sink;
//     std::size_t writes = 0;
//     auto apply(commit_order::offset o, const typename Inner::row_type& row) {
//       ++writes;
//       return this->inner().apply(o, row);
//     }
//   };
//
// `Inner` is the wrapped sink's type — the wrapper then owns it, constructed from the
// constructor's arguments — or a reference `Sink&` to a sink that lives elsewhere (and must
// outlive the wrapper). A derived wrapper hides the members it changes; everything else is
// forwarded. `Guard` runs around every forwarded call (memory::synchronized locks a mutex).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "commit_order/capabilities.hpp"
#include "commit_order/concepts.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::memory {

/// The default guard: runs each forwarded call as it is.
struct unguarded final {
  template <class F>
  constexpr decltype(auto) operator()(F&& call) const {
    return std::forward<F>(call)();
  }
};

namespace detail {
// The key and the capabilities are declared only when the wrapped sink declares them: a sink
// without a key must not look keyed (rule S15 and R8 read the alias), and one without
// capabilities must stay without (rule S6 says so, instead of a hard error here).
template <class S>
struct forwarded_key {};
template <class S>
requires requires {
  typename S::key_type;
}
struct forwarded_key<S> {
  using key_type = typename S::key_type;
};

template <class S>
struct forwarded_capabilities {};
template <class S>
requires declares_capabilities<S>
struct forwarded_capabilities<S> {
  using capabilities = capabilities_of_t<S>;
};
// What the wrapped sink's adapter implements, for rule S28.
template <class S>
requires declares_capabilities<S> && requires {
  typename S::implemented_capabilities;
}
struct forwarded_capabilities<S> {
  using capabilities = capabilities_of_t<S>;
  using implemented_capabilities = typename S::implemented_capabilities;
};

// What the wrapper's constructor takes: the sink for a reference, the sink's constructor
// arguments (or an aggregate's members) for an owned sink.
template <class T, class... Args>
concept brace_initialisable = requires(Args&&... args) {
  T{std::forward<Args>(args)...};
};
template <class T, class... Args>
concept initialisable_from = std::is_constructible_v<T, Args...> || brace_initialisable<T, Args...>;

// Each member the wrapper forwards, as a concept of the wrapped sink.
template <class S>
concept can_begin = requires(S& s) {
  s.begin();
};
template <class S>
concept can_commit = requires(S& s) {
  s.commit();
};
template <class S>
concept can_roll_back = requires(S& s) {
  s.rollback();
};
template <class S>
concept can_store_position = requires(S& s, position p) {
  s.store_position(p);
};
template <class S>
concept can_store_fenced_position = requires(S& s, position p, epoch e) {
  s.store_position(p, e);
};
template <class S>
concept can_claim = requires(S& s, epoch e) {
  s.claim(e);
};
template <class S>
concept can_claim_next = requires(S& s) {
  s.claim_next();
};
// The partitioned forms (a table shared by several partitions) and the stream registry.
template <class S>
concept can_store_partition_position = requires(S& s, partition_id k, position p) {
  s.store_position(k, p);
};
template <class S>
concept can_store_fenced_partition_position = requires(S& s, partition_id k, position p, epoch e) {
  s.store_position(k, p, e);
};
template <class S>
concept can_claim_partition = requires(S& s, partition_id k, epoch e) {
  s.claim(k, e);
};
template <class S>
concept can_claim_next_partition = requires(S& s, partition_id k) {
  s.claim_next(k);
};
template <class S>
concept can_load_partition_position = requires(S& s, partition_id k) {
  s.load_position(k);
};
template <class S>
concept can_report_partition_watermark = requires(const S& s, partition_id k) {
  s.applied_watermark(k);
};
template <class S>
concept can_report_era = requires(S& s) {
  s.era();
};
template <class S>
concept can_check_partition_count = requires(S& s, std::size_t n) {
  s.check_partition_count(n);
};
template <class S>
concept can_load_position = requires(S& s) {
  s.load_position();
};
template <class S>
concept can_report_watermark = requires(const S& s) {
  s.applied_watermark();
};
template <class S>
concept can_report_limit = requires(const S& s) {
  s.max_transaction_rows();
};
template <class S>
concept applies_row_reference = requires(S& s, offset o, typename S::row_type& row) {
  s.apply(o, row);
};
// apply(offset, row_type&) only: rule S14's mistake, forwarded so that S14 names it.
template <class S>
concept applies_only_mutable_row =
    applies_row_reference<S> && !commit_order::detail::applies_const_row<S>;
}  // namespace detail

template <class Inner, class Guard = unguarded>
class forwarding_sink : public detail::forwarded_key<std::remove_reference_t<Inner>>,
                        public detail::forwarded_capabilities<std::remove_reference_t<Inner>> {
  using sink_type = std::remove_reference_t<Inner>;

 public:
  using row_type = typename sink_type::row_type;

  /// Owning: the wrapped sink is built from `args`. By reference: `args` is the sink.
  template <class... Args>
  requires detail::initialisable_from<Inner, Args...>
  explicit forwarding_sink(Args&&... args) : inner_{std::forward<Args>(args)...} {}

  decltype(auto) apply(offset o, const row_type& row) requires
      commit_order::detail::applies_const_row<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.apply(o, row); });
  }
  decltype(auto) apply(offset o,
                       row_type& row) requires detail::applies_only_mutable_row<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.apply(o, row); });
  }

  decltype(auto) apply(partition_id k, offset o, const row_type& row) requires
      commit_order::detail::applies_const_partitioned_row<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.apply(k, o, row); });
  }

  /// Rows durable only at flush() (flushing_sink): a wrapper that dropped it would let the
  /// position pass rows still in flight.
  void flush() requires flushing_sink<sink_type> {
    guard_([&] { inner_.flush(); });
  }

  // ---- transactions and the position (what transactional_sink and fencing_sink call) -----

  void begin() requires detail::can_begin<sink_type> {
    guard_([&] { inner_.begin(); });
  }
  void commit() requires detail::can_commit<sink_type> {
    guard_([&] { inner_.commit(); });
  }
  void rollback() requires detail::can_roll_back<sink_type> {
    guard_([&] { inner_.rollback(); });
  }
  void store_position(position p) requires detail::can_store_position<sink_type> {
    guard_([&] { inner_.store_position(p); });
  }
  void store_position(position p, epoch e) requires detail::can_store_fenced_position<sink_type> {
    guard_([&] { inner_.store_position(p, e); });
  }
  decltype(auto) claim(epoch e) requires detail::can_claim<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.claim(e); });
  }
  decltype(auto) claim_next() requires detail::can_claim_next<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.claim_next(); });
  }
  decltype(auto) load_position() requires detail::can_load_position<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.load_position(); });
  }
  decltype(auto) load_position() const requires detail::can_load_position<const sink_type> {
    return guard_([&]() -> decltype(auto) { return inner().load_position(); });
  }

  // ---- the same per partition, and the stream registry (partitioned_fencing_sink,
  //      stream_registry) ------------------------------------------------------------------

  void store_position(partition_id k,
                      position p) requires detail::can_store_partition_position<sink_type> {
    guard_([&] { inner_.store_position(k, p); });
  }
  void store_position(partition_id k, position p,
                      epoch e) requires detail::can_store_fenced_partition_position<sink_type> {
    guard_([&] { inner_.store_position(k, p, e); });
  }
  /// A fingerprinting sink's store and claim answer: a wrapper that dropped them would store
  /// positions without the fingerprint, and a recreated source would be read from the middle.
  void store_position(partition_id k, position p, epoch e,
                      std::uint64_t f) requires fingerprinting_sink<sink_type> {
    guard_([&] { inner_.store_position(k, p, e, f); });
  }
  std::optional<std::uint64_t> claimed_fingerprint() const requires fingerprinting_sink<sink_type> {
    return guard_([&] { return inner().claimed_fingerprint(); });
  }
  decltype(auto) claim(partition_id k, epoch e) requires detail::can_claim_partition<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.claim(k, e); });
  }
  decltype(auto) claim_next(partition_id k) requires detail::can_claim_next_partition<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.claim_next(k); });
  }
  decltype(auto) load_position(
      partition_id k) requires detail::can_load_partition_position<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.load_position(k); });
  }
  decltype(auto) load_position(
      partition_id k) const requires detail::can_load_partition_position<const sink_type> {
    return guard_([&]() -> decltype(auto) { return inner().load_position(k); });
  }
  decltype(auto) applied_watermark(
      partition_id k) const requires detail::can_report_partition_watermark<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner().applied_watermark(k); });
  }
  decltype(auto) era() requires detail::can_report_era<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner_.era(); });
  }
  void check_partition_count(std::size_t n) requires detail::can_check_partition_count<sink_type> {
    guard_([&] { inner_.check_partition_count(n); });
  }
  /// What the pipeline tells a sink whose positions are bound to their source (the source's
  /// identity): a wrapper that dropped it would leave the wrapped sink's rows unbound.
  void bind_source(const std::string& identity) requires source_bound_sink<sink_type> {
    guard_([&] { inner_.bind_source(identity); });
  }
  /// The wrapped sink's data table, which a position store of the pipeline is bound to.
  std::string bound_table() const requires table_bound_sink<sink_type> {
    return inner().bound_table();
  }
  /// The database of the wrapped sink's table.
  std::string bound_database() const requires database_bound_sink<sink_type> {
    return inner().bound_database();
  }

  // ---- progress and limits (watermarked_sink, runtime_limited_sink) ---------------------------

  decltype(auto) applied_watermark() const requires detail::can_report_watermark<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner().applied_watermark(); });
  }
  decltype(auto) max_transaction_rows() const requires detail::can_report_limit<sink_type> {
    return guard_([&]() -> decltype(auto) { return inner().max_transaction_rows(); });
  }

  /// The wrapped sink (unguarded: for inspection once no writes are in flight).
  [[nodiscard]] sink_type& inner() noexcept { return inner_; }
  [[nodiscard]] const sink_type& inner() const noexcept { return inner_; }

 private:
  Inner inner_;
  [[no_unique_address]] Guard guard_{};
};

}  // namespace commit_order::memory
