// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/file/detail/io.hpp — POSIX file handling for the file adapter (private).
//
// Every call that can fail throws `io_error` naming the file; every short write is retried;
// every file descriptor is close-on-exec, so a child process (a crash test's consumer) never
// inherits a log it could keep locked.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "commit_order/adapters/file/errors.hpp"

namespace commit_order::file::detail {

/// An owned file descriptor.
class fd final {
 public:
  fd() noexcept = default;
  explicit fd(int raw) noexcept : raw_(raw) {}
  fd(fd&& other) noexcept : raw_(std::exchange(other.raw_, -1)) {}
  fd& operator=(fd&& other) noexcept {
    if (this != &other) {
      reset();
      raw_ = std::exchange(other.raw_, -1);
    }
    return *this;
  }
  fd(const fd&) = delete;
  fd& operator=(const fd&) = delete;
  ~fd() { reset(); }

  [[nodiscard]] int get() const noexcept { return raw_; }
  [[nodiscard]] explicit operator bool() const noexcept { return raw_ >= 0; }
  void reset() noexcept {
    if (raw_ >= 0)
      ::close(raw_);
    raw_ = -1;
  }

 private:
  int raw_ = -1;
};

inline fd open_file(const std::filesystem::path& path, int flags, ::mode_t mode = 0644) {
  int raw = -1;
  do {
    raw = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0)
    throw io_error("open", path, errno);
  return fd(raw);
}

/// Writes all of `bytes` at the file's current offset (O_APPEND files: at the end).
inline void write_all(const fd& f, std::span<const std::byte> bytes,
                      const std::filesystem::path& path) {
  while (!bytes.empty()) {
    const ::ssize_t n = ::write(f.get(), bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw io_error("write", path, errno);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

/// Reads up to `out.size()` bytes at `at`; fewer only at end of file.
inline std::size_t read_at(const fd& f, std::span<std::byte> out, std::uint64_t at,
                           const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ::ssize_t n =
        ::pread(f.get(), out.data() + done, out.size() - done, static_cast<::off_t>(at + done));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw io_error("read", path, errno);
    }
    if (n == 0)
      break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

/// Makes the file's data durable (fdatasync also flushes the size an append changed).
inline void sync_data(const fd& f, const std::filesystem::path& path) {
  if (::fdatasync(f.get()) != 0)
    throw io_error("fdatasync", path, errno);
}

/// Makes a directory's entries durable: without it a created, renamed or deleted file can
/// reappear or vanish after a power loss even though its data was synced.
inline void sync_directory(const std::filesystem::path& dir) {
  const fd d = open_file(dir, O_RDONLY | O_DIRECTORY);
  if (::fsync(d.get()) != 0)
    throw io_error("fsync", dir, errno);
}

/// Creates `dir` and any missing ancestors, syncing each new entry into its parent: a log
/// whose records were fsync'ed is still lost after a power loss if its directory's own entry
/// never reached the disk.
inline void create_directories_durably(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> missing;
  for (auto p = std::filesystem::absolute(dir); !std::filesystem::exists(p); p = p.parent_path())
    missing.push_back(p);
  std::filesystem::create_directories(dir);
  for (const auto& p : missing)
    sync_directory(p.parent_path());
}

inline std::uint64_t file_size(const fd& f, const std::filesystem::path& path) {
  struct ::stat st {};
  if (::fstat(f.get(), &st) != 0)
    throw io_error("fstat", path, errno);
  return static_cast<std::uint64_t>(st.st_size);
}

inline void truncate_to(const fd& f, std::uint64_t size, const std::filesystem::path& path) {
  if (::ftruncate(f.get(), static_cast<::off_t>(size)) != 0)
    throw io_error("ftruncate", path, errno);
}

/// Removes a file; one already gone counts as removed.
inline void remove_file(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw io_error("unlink", path, errno);
}

/// Takes an exclusive advisory lock on `path` (created if missing) or throws `log_busy`. The
/// kernel drops the lock when the process dies, so a killed consumer never blocks its restart.
inline fd lock_exclusive(const std::filesystem::path& path, const std::filesystem::path& owner) {
  fd f = open_file(path, O_RDWR | O_CREAT);
  while (::flock(f.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR)
      continue;
    if (errno == EWOULDBLOCK)
      throw log_busy(owner);
    throw io_error("flock", path, errno);
  }
  return f;
}

/// The system calls the file log makes, gathered in one type: the log's `Io` parameter. The
/// default forwards to the functions above and costs nothing. A test substitutes a type derived
/// from this one whose functions fail on cue, to show what the log does after a failure real
/// disks produce rarely and never on demand (ENOSPC in a segment header, EIO from a directory
/// fsync, an unlink refused), and which a test running as root cannot provoke with permissions.
struct system_io {
  static void create_directories_durably(const std::filesystem::path& dir) {
    detail::create_directories_durably(dir);
  }
  static fd lock_exclusive(const std::filesystem::path& path, const std::filesystem::path& owner) {
    return detail::lock_exclusive(path, owner);
  }
  static fd open_file(const std::filesystem::path& path, int flags) {
    return detail::open_file(path, flags);
  }
  static void write_all(const fd& f, std::span<const std::byte> bytes,
                        const std::filesystem::path& path) {
    detail::write_all(f, bytes, path);
  }
  static std::size_t read_at(const fd& f, std::span<std::byte> out, std::uint64_t at,
                             const std::filesystem::path& path) {
    return detail::read_at(f, out, at, path);
  }
  static void sync_data(const fd& f, const std::filesystem::path& path) {
    detail::sync_data(f, path);
  }
  static void sync_directory(const std::filesystem::path& dir) { detail::sync_directory(dir); }
  static std::uint64_t file_size(const fd& f, const std::filesystem::path& path) {
    return detail::file_size(f, path);
  }
  static void truncate_to(const fd& f, std::uint64_t size, const std::filesystem::path& path) {
    detail::truncate_to(f, size, path);
  }
  static void remove_file(const std::filesystem::path& path) { detail::remove_file(path); }
};

// ---- checksums and little-endian fields: the on-disk format is the same on every host ------

/// CRC-32 (IEEE 802.3, zlib's), chained over several pieces.
inline std::uint32_t crc32(std::uint32_t crc, std::span<const std::byte> bytes) noexcept {
  return static_cast<std::uint32_t>(
      ::crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

inline void put_u32(std::byte* out, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffU);
}
inline void put_u64(std::byte* out, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffU);
}
inline std::uint32_t get_u32(const std::byte* in) noexcept {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | std::to_integer<std::uint32_t>(in[i]);
  return v;
}
inline std::uint64_t get_u64(const std::byte* in) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | std::to_integer<std::uint64_t>(in[i]);
  return v;
}

}  // namespace commit_order::file::detail
