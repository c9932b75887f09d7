// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/position_access.hpp — where the loop reads and writes positions (private).
//
// A sink or store keeps one position (`load()`, `commit(p)`; `load_position()`,
// `store_position(p)`, `claim(e)`) or one per partition (`load(k)`, `commit(k, p)`, ...). A
// partitioned pipeline uses the per-partition forms; a single-partition pipeline uses the
// single forms where the part has them, and partition 0 of the per-partition forms where it
// has only those. The rules (R19, S16, S17) have made sure the forms called here exist.
#pragma once

#include <optional>

#include "commit_order/concepts.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::detail {

template <bool Partitioned, class Store>
std::optional<position> store_load(Store& s, partition_id k) {
  if constexpr (Partitioned || !position_store<Store>) {
    return s.load(k);
  } else {
    return s.load();
  }
}

template <bool Partitioned, class Store>
void store_commit(Store& s, partition_id k, position p) {
  if constexpr (Partitioned || !position_store<Store>) {
    s.commit(k, p);
  } else {
    s.commit(p);
  }
}

template <bool Partitioned, class Sink>
inline constexpr bool single_position_calls = !Partitioned && transactional_sink<Sink>;

template <bool Partitioned, class Sink>
std::optional<position> sink_load(Sink& s, partition_id k) {
  if constexpr (single_position_calls<Partitioned, Sink>) {
    return s.load_position();
  } else {
    return s.load_position(k);
  }
}

template <bool Partitioned, class Sink>
void sink_store(Sink& s, partition_id k, position p) {
  if constexpr (single_position_calls<Partitioned, Sink>) {
    s.store_position(p);
  } else {
    s.store_position(k, p);
  }
}

/// Does the loop fence with this sink: does it keep owner epochs in the form this pipeline uses?
template <bool Partitioned, class Sink>
inline constexpr bool fences = Partitioned ? partitioned_fencing_sink<Sink>
                                           : (fencing_sink<Sink> || partitioned_fencing_sink<Sink>);

template <bool Partitioned, class Sink>
inline constexpr bool single_fencing_calls = !Partitioned && fencing_sink<Sink>;

template <bool Partitioned, class Sink>
void sink_store(Sink& s, partition_id k, position p, epoch e) {
  if constexpr (single_fencing_calls<Partitioned, Sink>) {
    s.store_position(p, e);
  } else {
    s.store_position(k, p, e);
  }
}

template <bool Partitioned, class Sink>
std::optional<position> sink_claim(Sink& s, partition_id k, epoch e) {
  if constexpr (single_fencing_calls<Partitioned, Sink>) {
    return s.claim(e);
  } else {
    return s.claim(k, e);
  }
}

template <bool Partitioned, class Sink>
claimed sink_claim_next(Sink& s, partition_id k) {
  if constexpr (single_fencing_calls<Partitioned, Sink>) {
    return s.claim_next();
  } else {
    return s.claim_next(k);
  }
}

/// Can the loop read the applied watermark of one partition? A sink that reports one watermark
/// for all its rows cannot answer for a partition of a shared table.
template <bool Partitioned, class Sink>
inline constexpr bool has_watermark = partitioned_watermarked_sink<Sink> ||
                                      (!Partitioned && watermarked_sink<Sink>);

template <bool Partitioned, class Sink>
std::optional<offset> sink_watermark(const Sink& s, partition_id k) {
  if constexpr (!Partitioned && watermarked_sink<Sink>) {
    return s.applied_watermark();
  } else {
    return s.applied_watermark(k);
  }
}

/// Applies one row: with its partition where the rows record it, without where they do not.
template <bool Partitioned, class Sink, class Row>
decltype(auto) sink_apply(Sink& s, partition_id k, offset o, const Row& row) {
  if constexpr (Partitioned && partitioned_sink<Sink>) {
    return s.apply(k, o, row);
  } else if constexpr (requires { s.apply(o, row); }) {
    return s.apply(o, row);
  } else {
    return s.apply(k, o, row);
  }
}

}  // namespace commit_order::detail
