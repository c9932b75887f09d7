// SPDX-License-Identifier: BSL-1.0
// The conformance kit's power-cut facility (commit_order::testing::power_cut_facility) over the
// power_loss tier's LD_PRELOAD shim (tests/power_loss/shim/power_cut_shim.cpp): it watches one
// fixture's storage directory and keeps only what was synced there when the power goes out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>

#include "power_loss/power_cut.hpp"

namespace conformance {

class shim_power final {
 public:
  explicit shim_power(std::filesystem::path root) : root_(std::move(root)) {}

  void watch() { power_loss::shim::get().watch(root_); }
  void arm(std::uint64_t n) { power_loss::shim::get().arm(n); }
  [[nodiscard]] std::uint64_t syncs() const { return power_loss::shim::get().syncs(); }
  [[nodiscard]] bool is_out() const { return power_loss::shim::get().cut(); }
  /// Only synced bytes survive (no torn appends: tail seed 0, the shim's model).
  void restore() { power_loss::shim::get().materialise(0); }

 private:
  std::filesystem::path root_;
};

}  // namespace conformance
