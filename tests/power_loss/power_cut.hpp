// SPDX-License-Identifier: BSL-1.0
// The power_loss tests' handle on the power-cut shim (shim/power_cut_shim.cpp, where the model
// is described). The tests run with the shim in LD_PRELOAD (ctest sets it) and resolve its
// control functions at run time, so the test binary never links it: run without the shim, a
// test fails at once and says how to run it, instead of passing without having cut anything.
#pragma once

#include <dlfcn.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace power_loss {

class shim final {
 public:
  /// The preloaded shim; throws when it is not loaded.
  static shim& get() {
    static shim instance;
    return instance;
  }

  /// Watches `root`: what it holds now is the durable image. Counters cleared, disarmed.
  void watch(const std::filesystem::path& root) {
    if (reset_(root.c_str()) != 0)
      fail("cannot watch '" + root.string() + "'");
  }
  /// The power goes out at the `at_sync`-th sync point from now on (0: never).
  void arm(std::uint64_t at_sync) { arm_(at_sync); }
  /// Sync points (fsync/fdatasync of a watched file or directory) since watch().
  [[nodiscard]] std::uint64_t syncs() const { return syncs_(); }
  /// True once the power is out: an operation that returns after this was not acknowledged.
  [[nodiscard]] bool cut() const { return happened_() != 0; }
  /// Cuts the power if it is still on, rewrites the root to its durable image and watches it
  /// again. `tail_seed` != 0 lets a seeded prefix of each file's unsynced appended bytes
  /// survive too (a torn append).
  void materialise(std::uint64_t tail_seed = 0) {
    if (materialise_(tail_seed) != 0)
      fail("cannot materialise the durable image (is a file under the root still open?)");
  }

 private:
  using reset_fn = int (*)(const char*);
  using arm_fn = void (*)(unsigned long long);
  using syncs_fn = unsigned long long (*)();
  using happened_fn = int (*)();
  using materialise_fn = int (*)(unsigned long long);

  template <class F>
  static F resolve(const char* name) {
    auto* f = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
    if (f == nullptr)
      throw std::runtime_error(std::string("power_loss: the power-cut shim is not loaded (") +
                               name +
                               " not found): run these tests through ctest, or with "
                               "LD_PRELOAD=<build>/tests/power_loss/libcommit_order_power_cut.so");
    return f;
  }

  shim()
      : reset_(resolve<reset_fn>("commit_order_power_cut_reset"))
      , arm_(resolve<arm_fn>("commit_order_power_cut_arm"))
      , syncs_(resolve<syncs_fn>("commit_order_power_cut_syncs"))
      , happened_(resolve<happened_fn>("commit_order_power_cut_happened"))
      , materialise_(resolve<materialise_fn>("commit_order_power_cut_materialise")) {}

  [[noreturn]] static void fail(const std::string& what) {
    throw std::runtime_error("power_loss: " + what + ": " + std::strerror(errno));
  }

  reset_fn reset_;
  arm_fn arm_;
  syncs_fn syncs_;
  happened_fn happened_;
  materialise_fn materialise_;
};

/// True once the power is out (shorthand for the workloads).
inline bool power_is_out() {
  return shim::get().cut();
}

}  // namespace power_loss
