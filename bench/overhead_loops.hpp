// SPDX-License-Identifier: BSL-1.0
// The measured loops of the overhead benchmark: each variant's step(), the code its figures are
// of. overhead_bench includes this header in its one translation unit (overhead.cpp), as the
// benchmark always was. overhead_split_bench compiles each variant in a translation unit of its
// own (overhead_<variant>.cpp, which includes this header and instantiates only that variant),
// and its harness never sees these definitions: g++'s inliner works to budgets for a whole
// translation unit, so with every loop in one unit the code of one depends on the others
// (measured with g++ 12 on the loop as it was at 91abe50: adding the referenced twin to the one
// unit took AtMostOnce batch 1 from 183.56 to 199.56 instructions per record for the pipeline
// and from 180.56 to 195.56 for the owned twin, whose source had not changed).
#pragma once

#include <algorithm>
#include <cstddef>

#include "overhead_cases.hpp"

namespace overhead {

// step() is noinline (the benchmark calls it once per iteration); unit() is `inline`, as it was
// when written inside its class, because the inliner weighs a function declared inline
// differently.
template <class Policy>
std::size_t pipeline_case<Policy>::step() {
  return p->poll_once();
}

template <class Policy, parts Access>
std::size_t handwritten_loop<Policy, Access>::step() {
  const auto all = log().poll(batch);
  if (all.empty())
    return 0;
  // A careful loop honours the sink's transaction limit too: split, one position per split.
  const std::size_t limit = table().max_transaction_rows();
  if (limit != 0 && limit < all.size()) {
    for (std::size_t done = 0; done < all.size(); done += limit) {
      unit(all.subspan(done, std::min(limit, all.size() - done)));
    }
  } else {
    unit(all);
  }
  return all.size();
}

template <class Policy, parts Access>
template <class Records>
inline void handwritten_loop<Policy, Access>::unit(Records records) {
  // The table once per unit, as a careful loop reads it (a pointer re-read per record would cost
  // the referenced twin a load the pipeline does not pay).
  table_t& t = table();
  const co::position end = co::position::after(records.back().source_offset);
  if constexpr (std::is_same_v<Policy, co::AtMostOnce<>>) {
    st().commit(commit_order::partition_id{0}, end);
    for (const auto& r : records)
      t.apply(commit_order::partition_id{0}, r.source_offset, r.event);
  } else if constexpr (std::is_same_v<Policy, co::AtLeastOnce<>>) {
    for (const auto& r : records)
      t.apply(commit_order::partition_id{0}, r.source_offset, r.event);
    st().commit(commit_order::partition_id{0}, end);
  } else {
    t.begin();
    try {
      for (const auto& r : records)
        t.apply(commit_order::partition_id{0}, r.source_offset, r.event);
      t.store_position(commit_order::partition_id{0}, end, owner);
      t.commit();
    } catch (...) {
      t.rollback();
      throw;
    }
  }
}

template <class Policy>
std::size_t raw_sink_case<Policy>::step() {
  const auto records = f.log.poll(batch);
  for (const auto& r : records)
    f.table.apply(commit_order::partition_id{0}, r.source_offset, r.event);
  return records.size();
}

}  // namespace overhead
