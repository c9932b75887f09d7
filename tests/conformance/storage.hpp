// SPDX-License-Identifier: BSL-1.0
// Where the conformance fixtures keep their storage: a fresh directory per fixture, removed
// when the fixture goes, on a RAM file system (/dev/shm) when the machine has one.
//
// Why RAM: the crash matrix and the random schedules simulate *process* crashes, which keep the
// page cache, so what they observe is the same on tmpfs as on a disk — without waiting for
// thousands of fsyncs, directory removals and journal commits of a shared disk (on the build
// machines these cost 0.2-4 ms each, and the kit opens a fresh storage per scenario). Power cuts
// are simulated by the power-cut shim, which keeps its own durable image whatever the file
// system. COMMIT_ORDER_CONFORMANCE_DIR overrides the place (e.g. to run on a real disk).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace conformance {

class storage_dir final {
 public:
  storage_dir() {
    std::string pattern = (base() / "commit_order_conformance.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a storage directory under " + base().string());
    path_ = pattern;
  }
  storage_dir(const storage_dir&) = delete;
  storage_dir& operator=(const storage_dir&) = delete;
  ~storage_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

  static std::filesystem::path base() {
    if (const char* dir = std::getenv("COMMIT_ORDER_CONFORMANCE_DIR"); dir != nullptr && *dir)
      return dir;
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
      return "/dev/shm";
    return std::filesystem::temp_directory_path();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace conformance
