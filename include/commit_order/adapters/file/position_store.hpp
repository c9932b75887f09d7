// commit_order/adapters/file/position_store.hpp — a consumer position kept in one small file.
//
// For the policies that commit their position outside the sink (AtMostOnce, AtLeastOnce).
// commit(p) replaces the file atomically: write a temporary file, fdatasync it, rename it over
// the old one, fsync the directory. A crash at any point leaves either the old position or the
// new one, never a mixture, and a commit that returned survives a power loss (`Synced`).
//
// File format (32 bytes, little-endian): "copos002" | position (u64) | flags (u32; bit 0: a
// fingerprint follows) | fingerprint (u64) | CRC-32 of the first 28. The first format
// ("copos001" | position | CRC-32 of the first 16, 20 bytes) is still read.
// A file that does not verify is reported, never read as "no position": a consumer that
// silently restarted from earliest() would replay, or under retention skip, what it had done.
#pragma once

#include <fcntl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>

#include "commit_order/adapters/file/detail/io.hpp"
#include "commit_order/adapters/file/errors.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/offset.hpp"

namespace commit_order::file {

class position_store final {
 public:
  /// commit() returns after fdatasync + rename + directory fsync.
  using capabilities = commit_order::capabilities<Synced>;

  static constexpr std::size_t file_bytes = 32;
  static constexpr std::array<char, 8> magic{'c', 'o', 'p', 'o', 's', '0', '0', '2'};
  /// The first format (no fingerprint), still read.
  static constexpr std::size_t first_format_bytes = 20;
  static constexpr std::array<char, 8> first_magic{'c', 'o', 'p', 'o', 's', '0', '0', '1'};

  /// The store kept in `file`; its directory must exist. Nothing is read or written yet.
  explicit position_store(std::filesystem::path file)
      : file_(std::move(file)), temporary_(file_.string() + ".tmp") {}

  /// The committed position, or none before the first commit.
  [[nodiscard]] std::optional<position> load() const {
    const auto stored = read();
    return stored ? std::optional{stored->at} : std::nullopt;
  }

  /// The fingerprint of the record the position was committed after (none when the commit
  /// carried none, or the file is of the first format).
  [[nodiscard]] std::optional<std::uint64_t> load_fingerprint() const {
    const auto stored = read();
    return stored ? stored->fingerprint : std::nullopt;
  }

  /// Makes `p` the committed position; durable on return.
  void commit(position p) { write(p, std::nullopt); }

  /// Makes `p` the committed position, with the fingerprint of the record before it (see
  /// fingerprinted_source); durable on return.
  void commit(position p, std::uint64_t fingerprint) { write(p, fingerprint); }

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return file_; }

 private:
  struct stored {
    position at;
    std::optional<std::uint64_t> fingerprint;
  };

  [[nodiscard]] std::optional<stored> read() const {
    std::error_code ec;
    if (!std::filesystem::exists(file_, ec)) {
      if (ec)
        throw io_error("stat", file_, ec.value());
      return std::nullopt;
    }
    const detail::fd f = detail::open_file(file_, O_RDONLY);
    std::array<std::byte, file_bytes + 1> bytes{};
    const std::size_t n = detail::read_at(f, bytes, 0, file_);
    const bool first_format = n == first_format_bytes && has_magic(bytes, first_magic);
    if (!first_format && n != file_bytes)
      throw corrupt_file(file_, "a position file holds " + std::to_string(file_bytes) +
                                    " bytes, this one " + std::to_string(n));
    if (!first_format && !has_magic(bytes, magic))
      throw corrupt_file(file_, "it is not a commit_order position file");
    const std::size_t covered = n - 4;
    const std::uint32_t crc = detail::crc32(0, std::span(bytes).first(covered));
    if (crc != detail::get_u32(bytes.data() + covered))
      throw corrupt_file(file_, "the position fails its checksum");
    stored s{position{static_cast<position::value_type>(detail::get_u64(bytes.data() + 8))}, {}};
    if (!first_format && (detail::get_u32(bytes.data() + 16) & 1U) != 0)
      s.fingerprint = detail::get_u64(bytes.data() + 20);
    return s;
  }

  template <std::size_t N>
  static bool has_magic(const std::array<std::byte, N>& bytes,
                        const std::array<char, 8>& which) noexcept {
    for (std::size_t i = 0; i < which.size(); ++i)
      if (bytes[i] != static_cast<std::byte>(which[i]))
        return false;
    return true;
  }

  void write(position p, std::optional<std::uint64_t> fingerprint) {
    std::array<std::byte, file_bytes> bytes{};
    for (std::size_t i = 0; i < magic.size(); ++i)
      bytes[i] = static_cast<std::byte>(magic[i]);
    detail::put_u64(bytes.data() + 8, static_cast<std::uint64_t>(p.value()));
    detail::put_u32(bytes.data() + 16, fingerprint ? 1U : 0U);
    detail::put_u64(bytes.data() + 20, fingerprint.value_or(0));
    detail::put_u32(bytes.data() + 28, detail::crc32(0, std::span(bytes).first(28)));
    {
      // O_TRUNC: a temporary left by a crash mid-commit is simply overwritten.
      const detail::fd f = detail::open_file(temporary_, O_WRONLY | O_CREAT | O_TRUNC);
      detail::write_all(f, bytes, temporary_);
      // Synced before the rename: otherwise a power loss could leave the new name pointing at
      // a file whose data never reached the disk.
      detail::sync_data(f, temporary_);
    }
    if (std::rename(temporary_.c_str(), file_.c_str()) != 0)
      throw io_error("rename to '" + file_.string() + "' of", temporary_, errno);
    // The rename itself is a directory update: until it is synced, a power loss can bring
    // back the previous position.
    detail::sync_directory(file_.has_parent_path() ? file_.parent_path()
                                                   : std::filesystem::path("."));
  }

  std::filesystem::path file_;
  std::filesystem::path temporary_;
};

}  // namespace commit_order::file
