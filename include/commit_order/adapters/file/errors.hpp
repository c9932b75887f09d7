// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/file/errors.hpp — what the file adapter reports instead of guessing.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "commit_order/errors.hpp"

namespace commit_order::file {

/// A system call on a file failed (open, write, fsync, rename, ...). The operation named in the
/// message did not take effect; nothing was acknowledged.
class io_error final : public infrastructure_error {
 public:
  io_error(const std::string& operation, const std::filesystem::path& path, int err)
      : infrastructure_error("commit_order::file: " + operation + " '" + path.string() +
                             "' failed: " + std::system_category().message(err))
      , code_(err, std::system_category()) {}

  [[nodiscard]] std::error_code code() const noexcept { return code_; }

 private:
  std::error_code code_;
};

/// A file holds bytes that cannot be what this adapter wrote, or that were damaged since: a
/// frame that fails its checksum and is not a torn tail (a frame cut short by the end of the
/// newest segment, or zeros from it to the end), a segment that ends short of its successor, a
/// position file of the wrong shape. The message names the file and, for a record, its byte
/// and record offsets. Never repaired: only a torn *tail* is provably unacknowledged data.
class corrupt_file final : public infrastructure_error {
 public:
  corrupt_file(const std::filesystem::path& path, const std::string& what)
      : infrastructure_error("commit_order::file: '" + path.string() + "' is corrupt: " + what) {}
};

/// Another process holds the log: two writers would interleave frames and the torn-tail repair
/// of one could cut a record the other is still writing.
class log_busy final : public error {
 public:
  explicit log_busy(const std::filesystem::path& dir)
      : error("commit_order::file: the log in '" + dir.string() +
              "' is open in another process (or another log object)") {}
};

/// An event's encoding does not decode (wrong size for the codec), or is too large to frame.
class codec_error final : public error {
 public:
  using error::error;
};

}  // namespace commit_order::file
