// SPDX-License-Identifier: BSL-1.0
// commit_order/adapters/file/log.hpp — an append-only log in segment files: a real source.
//
//   commit_order::file::log<Event, Codec = trivial_codec<Event>, Sync = sync_each_append,
//                           Io = detail::system_io>
//
// Offsets start at 0 and only grow (Kafka's convention, like memory::log). Records live in
// segment files named by their first offset; a segment is closed once it reaches
// `segment_bytes` and a new one is started. Retention deletes whole closed segments, which
// moves earliest(): a consumer whose stored position lies in a deleted segment gets
// `position_lost` from seek(), and the log's own reader, if retention overtook it, gets
// `position_lost` from its next poll(): never an empty read, never a jump to what is left.
//
// On-disk format (little-endian, the same on every host):
//   segment  = header frame*
//   header   = "colog001" (8 bytes) | first offset (u64)
//   frame    = payload length (u32) | crc (u32) | payload
//   crc      = CRC-32 of length | the record's offset (u64) | payload
// The offset is covered by the checksum but not stored: a frame copied to the wrong place does
// not verify.
//
// Torn tail or corruption. A process killed mid-append leaves a prefix of its frame at the end
// of the newest segment; a power cut before the sync can also leave the file extended with
// zeros. Opening the log cuts off exactly these, and nothing else, because neither can hold an
// acknowledged record (an append returns after the whole frame is written, and under
// sync_each_append synced):
//   - a frame cut short by the end of the file (its header, or the payload its length names);
//   - a first failing frame from which every byte to the end of the file is zero.
// Any other frame that does not verify (a complete frame with a wrong checksum, whether more
// bytes follow it or not) may be an acknowledged record that was damaged later: the log refuses
// to open with `corrupt_file` naming the segment, the byte and the record, and changes nothing.
// Closed segments are never repaired: the reader reports a bad frame in one as `corrupt_file`.
// Only the newest segment can be torn: a roll syncs the segment it closes before the next one
// exists. (One case cannot be told apart: a damaged length field in the last records that
// makes a frame claim more bytes than the file holds reads as a torn frame.)
//
// A roll that fails (ENOSPC in the new header, an EIO from the directory fsync) throws from
// append() and leaves the log appendable: the next append retries the roll, rewriting the
// half-made segment, and no record goes to the old segment in between. Retention that fails
// midway throws too; segments() then still names exactly the files that exist.
//
// Durability is what `Sync` says and nothing more: `sync_each_append` fdatasyncs before
// append() returns (Synced); `sync_on_flush` hands appends to the OS (Buffered: they survive
// the process, not the machine) until flush().
//
// One process opens a log at a time (an advisory lock on `<dir>/.lock`), because the torn-tail
// repair on open must never cut a frame another writer is still appending. Not thread-safe.
//
// `Io` is the system calls the log makes (detail::system_io): a test seam for fault injection.
// Leave it defaulted.
#pragma once

#include <fcntl.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "commit_order/adapters/file/codec.hpp"
#include "commit_order/adapters/file/detail/io.hpp"
#include "commit_order/adapters/file/errors.hpp"
#include "commit_order/capabilities.hpp"
#include "commit_order/errors.hpp"
#include "commit_order/offset.hpp"
#include "commit_order/part_checks.hpp"
#include "commit_order/record.hpp"

namespace commit_order::file {

/// append() returns once the record is fdatasync'ed: it survives a power loss.
struct sync_each_append final {
  using durability = Synced;
  static constexpr bool each_append = true;
};
/// append() returns once the OS has the record (it survives the process, not the machine);
/// flush() makes everything appended so far durable.
struct sync_on_flush final {
  using durability = Buffered;
  static constexpr bool each_append = false;
};

template <class S>
concept sync_policy = std::is_same_v<S, sync_each_append> || std::is_same_v<S, sync_on_flush>;

struct log_options final {
  /// A segment is closed, and a new one started, before a frame would take it past this size.
  std::uint64_t segment_bytes = std::uint64_t{16} << 20;
  /// 0 keeps everything. Otherwise, after each roll the oldest closed segments are deleted
  /// while the segments together hold more than this many bytes.
  std::uint64_t retention_bytes = 0;
  /// Appends of larger encoded events are refused (codec_error). It limits appends only: a
  /// record already in the log verifies by its checksum and is read whatever its size, so a
  /// log written with a larger limit opens, and reads, in full.
  std::uint32_t max_record_bytes = std::uint32_t{16} << 20;
  /// What the positions a sink stores for this log are bound to (identity()). Empty: the log's
  /// directory, as an absolute path without links. Name it where instances of one consumer read
  /// copies of one log at different paths (a successor on another host).
  std::string name{};
};

/// A segment as the log sees it: its first offset and its size in bytes.
struct segment_info final {
  position base;
  std::uint64_t bytes = 0;
};

// The log's checks (FL2, FL3) are its constraint, so they run where its type is named rather
// than deep in whatever instantiates it first (a pipeline's rules); each holds once reported.
// sizeof first: the codec is completed outside the concept, so a check of its own
// (trivial_codec's FL1) is reported from here.
template <class Event, class Codec = trivial_codec<Event>, class Sync = sync_each_append,
          class Io = detail::system_io>
requires(part_rules::require<part_rules::file_codec_shape,
                             (sizeof(Codec) != 0 && codec<Codec, Event>)>() &&
         part_rules::require<part_rules::file_sync_policy, sync_policy<Sync>>()) class log final {
  // What the log runs on: stand-ins once a check above refused Codec or Sync, so that the
  // check's message is the one error.
  using codec_type = std::conditional_t<codec<Codec, Event>, Codec, detail::refused_codec<Event>>;
  using sync_type = std::conditional_t<sync_policy<Sync>, Sync, sync_each_append>;

 public:
  using record_type = logged<Event>;
  using event_type = Event;
  /// What an append() that returned survives.
  using append_durability = typename sync_type::durability;
  /// The same, as the source's declared durability (rule R9c compares it with the position's).
  using capabilities = commit_order::capabilities<append_durability>;

  static constexpr std::uint64_t segment_header_bytes = 16;
  static constexpr std::uint64_t frame_header_bytes = 8;
  static constexpr std::array<char, 8> magic{'c', 'o', 'l', 'o', 'g', '0', '0', '1'};

  /// Opens the log in `dir` (created if missing), repairing a torn tail.
  explicit log(std::filesystem::path dir, log_options options = {})
      : dir_(std::move(dir)), options_(options) {
    Io::create_directories_durably(dir_);
    lock_ = Io::lock_exclusive(dir_ / ".lock", dir_);
    discover_segments();
    if (segments_.empty()) {
      writer_ = create_segment(0, false);
      segments_.push_back(segment_info{position{0}, segment_header_bytes});
      end_ = 0;
    } else {
      recover_tail();
      writer_ = Io::open_file(path_of(segments_.back()), O_WRONLY | O_APPEND);
    }
    reader_.next = segments_.front().base.value();
  }

  log(log&&) noexcept = default;
  log& operator=(log&&) noexcept = default;
  log(const log&) = delete;
  log& operator=(const log&) = delete;
  ~log() = default;

  // ---- writing -----------------------------------------------------------------------------

  /// Appends an event and returns its offset. Durable on return under sync_each_append; on
  /// failure nothing of the record remains in the file.
  offset append(const Event& event) {
    if (broken_)
      throw error("commit_order::file: an earlier append to '" + dir_.string() +
                  "' failed and could not be undone; reopen the log to repair it");
    frame_.assign(frame_header_bytes, std::byte{0});
    codec_type::encode(event, frame_);
    const std::uint64_t payload = frame_.size() - frame_header_bytes;
    if (payload > options_.max_record_bytes)
      throw codec_error("commit_order::file: an encoded event of " + std::to_string(payload) +
                        " bytes exceeds max_record_bytes (" +
                        std::to_string(options_.max_record_bytes) + ")");
    detail::put_u32(frame_.data(), static_cast<std::uint32_t>(payload));
    detail::put_u32(frame_.data() + 4, frame_crc(static_cast<std::uint32_t>(payload), end_,
                                                 std::span(frame_).subspan(frame_header_bytes)));

    // After a failed roll the next record goes to the new segment whatever its size: put in the
    // old one, it would lie below the base of the half-made segment, which a reopen takes for
    // the end of the log.
    if (roll_pending_ || (segments_.back().bytes > segment_header_bytes &&
                          segments_.back().bytes + frame_.size() > options_.segment_bytes))
      roll();

    segment_info& active = segments_.back();
    const auto path = path_of(active);
    try {
      Io::write_all(writer_, frame_, path);
      if constexpr (sync_type::each_append)
        Io::sync_data(writer_, path);
    } catch (...) {
      // A half-written frame would sit between acknowledged records and the next append's
      // frame, where no reader could tell it from corruption: cut it off, or stop appending.
      try {
        Io::truncate_to(writer_, active.bytes, path);
      } catch (...) {
        broken_ = true;
      }
      throw;
    }
    active.bytes += frame_.size();
    return offset{end_++};
  }

  /// Makes every append so far durable (the only sync sync_on_flush does besides rolls).
  void flush() { Io::sync_data(writer_, path_of(segments_.back())); }

  // ---- reading (the source concept) --------------------------------------------------------

  /// Moves the read position. Below earliest() the records were deleted: `position_lost`,
  /// never a silent jump to what is left.
  void seek(position p) {
    if (p < earliest())
      throw position_lost(p, earliest());
    if (p > end())
      throw position_beyond_end(p, end());
    reader_.next = p.value();
    reader_.positioned = false;
  }

  /// Up to `max` records from the read position; advances the read position past them. Every
  /// record's checksum is verified. The span stays valid until the next poll(). When retention
  /// deleted records this reader had not read: `position_lost{read_position(), earliest()}`,
  /// on every poll until a seek() says where to go on (as memory::log does).
  [[nodiscard]] std::span<const record_type> poll(std::size_t max) {
    // Moving on to earliest() instead would hand the pipeline a batch after a gap, and it would
    // commit a position past records that never reached the sink.
    if (reader_.next < earliest().value())
      throw position_lost(position{reader_.next}, earliest());
    batch_.clear();
    while (batch_.size() < max && reader_.next < end_) {
      position_reader();
      read_frame(true);
    }
    return batch_;
  }

  /// What the positions a sink stores for this log were read from (identified_source): the
  /// log's directory, as an absolute path without links. Two logs into one table never share a
  /// position; a log moved to another directory is refused where its position was bound to
  /// the old one (position_bound_elsewhere, which names the statement that releases it).
  [[nodiscard]] std::string identity() const {
    return "file log '" +
           (options_.name.empty() ? std::filesystem::weakly_canonical(dir_).string()
                                  : options_.name) +
           "'";
  }

  /// The record's fingerprint: the CRC its frame carries (of its offset and encoding). The
  /// pipeline stores the fingerprint of the last record a position covers beside the
  /// position, and compares it at recovery with `fingerprint_at`: a log that lost records
  /// behind a stored position and gave their offsets to new records is caught there.
  [[nodiscard]] std::uint64_t fingerprint(const record_type& r) {
    scratch_.clear();
    codec_type::encode(r.event, scratch_);
    return frame_crc(static_cast<std::uint32_t>(scratch_.size()), r.source_offset.value(),
                     scratch_);
  }

  /// The fingerprint of the record stored at `o`, read from its frame (none when `o` is not
  /// retained). The read position does not move.
  [[nodiscard]] std::optional<std::uint64_t> fingerprint_at(offset o) {
    if (position::at(o) < earliest() || !(o.value() < end_))
      return std::nullopt;
    const offset::value_type resume = reader_.next;
    reader_.next = o.value();
    reader_.positioned = false;
    std::optional<std::uint64_t> crc;
    try {
      position_reader();
      const frame_result r = check_frame(reader_.chunks, reader_.file, reader_.path, reader_.pos,
                                         segments_[reader_.segment].bytes, reader_.next);
      if (r.status == frame_status::ok)
        crc = frame_crc(r.length, o.value(), r.payload);
    } catch (...) {
      reader_.next = resume;
      reader_.positioned = false;
      throw;
    }
    reader_.next = resume;
    reader_.positioned = false;
    if (!crc)
      throw corrupt_file(reader_.path, "record " + std::to_string(o.value()) +
                                           " fails its checksum; restore the segment from a copy");
    return crc;
  }

  /// Position of the first record still retained.
  [[nodiscard]] position earliest() const noexcept { return segments_.front().base; }
  /// Position just past the last record.
  [[nodiscard]] position end() const noexcept { return position{end_}; }
  /// Where the next poll() reads.
  [[nodiscard]] position read_position() const noexcept { return position{reader_.next}; }

  // ---- retention ---------------------------------------------------------------------------

  /// Deletes every segment whose records all lie before `p` (whole segments only, never the
  /// one being appended to), so earliest() moves to the first segment kept, which is <= p.
  /// Like memory::log, the reader of this object stays where it is: behind earliest(), its next
  /// poll() is `position_lost`; a consumer that recovers from an older stored position gets
  /// `position_lost` from seek(). If an unlink fails, the segments deleted so far are gone from
  /// segments(), the rest are kept, and the io_error propagates; calling again finishes.
  void truncate_before(position p) {
    std::size_t drop = 0;
    while (drop + 1 < segments_.size() && segments_[drop + 1].base <= p)
      ++drop;
    drop_oldest(drop);
  }

  // ---- what tests and operators inspect ----------------------------------------------------

  [[nodiscard]] std::span<const segment_info> segments() const noexcept { return segments_; }
  /// Bytes of a torn tail cut off when this log was opened (0 when the tail was clean).
  [[nodiscard]] std::uint64_t repaired_tail_bytes() const noexcept { return repaired_; }
  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }
  /// The file holding the segment that starts at `base`.
  [[nodiscard]] std::filesystem::path segment_path(position base) const {
    return path_of(segment_info{base, 0});
  }

 private:
  // Reads [at, at + n) of one file through a buffer, so a poll of small records costs one
  // pread per chunk rather than two per record. It holds no pointer to its file, so a moved
  // log never reads through a dangling one.
  class chunk_reader final {
   public:
    void reset() noexcept {
      buffer_at_ = 0;
      buffered_ = 0;
    }
    // nullptr when the file ends before at + n. Valid until the next view().
    const std::byte* view(const detail::fd& file, const std::filesystem::path& path,
                          std::uint64_t at, std::size_t n) {
      if (at >= buffer_at_ && at + n <= buffer_at_ + buffered_)
        return buffer_.data() + (at - buffer_at_);
      if (buffer_.size() < std::max<std::size_t>(n, chunk))
        buffer_.resize(std::max<std::size_t>(n, chunk));
      buffered_ = Io::read_at(file, buffer_, at, path);
      buffer_at_ = at;
      return buffered_ < n ? nullptr : buffer_.data();
    }

   private:
    static constexpr std::size_t chunk = 64 * 1024;
    std::vector<std::byte> buffer_;
    std::uint64_t buffer_at_ = 0;
    std::size_t buffered_ = 0;
  };

  struct reader_state {
    offset::value_type next = 0;  // the offset the next frame holds
    bool positioned = false;      // file/pos below are valid for `next`
    std::size_t segment = 0;      // index into segments_
    detail::fd file;
    std::filesystem::path path;
    std::uint64_t pos = 0;  // byte position of the frame of `next`
    chunk_reader chunks;
  };

  enum class frame_status { ok, short_file, bad_checksum };
  struct frame_result {
    frame_status status;
    std::uint32_t length = 0;
    std::span<const std::byte> payload{};  // valid until the reader's next view()
  };

  static std::uint32_t frame_crc(std::uint32_t length, offset::value_type at,
                                 std::span<const std::byte> payload) noexcept {
    std::array<std::byte, 12> prefix{};
    detail::put_u32(prefix.data(), length);
    detail::put_u64(prefix.data() + 4, static_cast<std::uint64_t>(at));
    return detail::crc32(detail::crc32(0, prefix), payload);
  }

  std::filesystem::path path_of(const segment_info& s) const {
    std::array<char, 21> digits{};
    const auto v = static_cast<std::uint64_t>(s.base.value());
    const auto [ptr, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), v);
    (void)ec;  // 21 characters hold any 64-bit value
    const std::string_view number(digits.data(), static_cast<std::size_t>(ptr - digits.data()));
    return dir_ / (std::string(20 - number.size(), '0') + std::string(number) + ".log");
  }

  void discover_segments() {
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      const auto name = entry.path().filename().string();
      if (name.size() != 24 || !name.ends_with(".log"))
        continue;
      std::uint64_t base = 0;
      const auto [ptr, ec] = std::from_chars(name.data(), name.data() + 20, base);
      if (ec != std::errc{} || ptr != name.data() + 20)
        continue;
      segments_.push_back(
          segment_info{position{static_cast<position::value_type>(base)},
                       static_cast<std::uint64_t>(std::filesystem::file_size(entry.path()))});
    }
    std::ranges::sort(segments_, {}, &segment_info::base);
  }

  // `replace`: the file may be left over from a roll of this object that failed. No record was
  // ever appended to it (the log never named it), so it is rewritten. Otherwise O_EXCL: a
  // segment file that exists already holds someone's records.
  detail::fd create_segment(offset::value_type base, bool replace) {
    const auto path = path_of(segment_info{position{base}, 0});
    detail::fd f =
        Io::open_file(path, O_WRONLY | O_APPEND | O_CREAT | (replace ? O_TRUNC : O_EXCL));
    write_segment_header(f, base, path);
    // The new file's name must be durable before any record in it is acknowledged.
    Io::sync_directory(dir_);
    return f;
  }

  static void write_segment_header(const detail::fd& f, offset::value_type base,
                                   const std::filesystem::path& path) {
    std::array<std::byte, segment_header_bytes> header{};
    for (std::size_t i = 0; i < magic.size(); ++i)
      header[i] = static_cast<std::byte>(magic[i]);
    detail::put_u64(header.data() + 8, static_cast<std::uint64_t>(base));
    Io::write_all(f, header, path);
    Io::sync_data(f, path);
  }

  static bool header_valid(const std::byte* h, offset::value_type base) noexcept {
    for (std::size_t i = 0; i < magic.size(); ++i)
      if (h[i] != static_cast<std::byte>(magic[i]))
        return false;
    return detail::get_u64(h + 8) == static_cast<std::uint64_t>(base);
  }

  // Reads and verifies the frame of record `at` at byte `pos` of `file`, not past `limit`.
  // No size limit but the file's: a length field never makes it read more than the file holds,
  // and a large record that verifies is a record (max_record_bytes limits appends only).
  static frame_result check_frame(chunk_reader& chunks, const detail::fd& file,
                                  const std::filesystem::path& path, std::uint64_t pos,
                                  std::uint64_t limit, offset::value_type at) {
    if (pos + frame_header_bytes > limit)
      return {frame_status::short_file};
    const std::byte* header = chunks.view(file, path, pos, frame_header_bytes);
    if (header == nullptr)
      return {frame_status::short_file};
    const std::uint32_t length = detail::get_u32(header);
    const std::uint32_t crc = detail::get_u32(header + 4);
    if (pos + frame_header_bytes + length > limit)
      return {frame_status::short_file, length};
    const std::byte* payload = chunks.view(file, path, pos + frame_header_bytes, length);
    if (payload == nullptr)
      return {frame_status::short_file, length};
    const std::span<const std::byte> bytes(payload, length);
    if (frame_crc(length, at, bytes) != crc)
      return {frame_status::bad_checksum, length};
    return {frame_status::ok, length, bytes};
  }

  // True when bytes [from, to) of `file` are all zero: what a file system shows for a file
  // extended by writes that were never synced when the power went.
  static bool all_zero(chunk_reader& chunks, const detail::fd& file,
                       const std::filesystem::path& path, std::uint64_t from, std::uint64_t to) {
    constexpr std::uint64_t step = 64 * 1024;
    for (std::uint64_t at = from; at < to;) {
      const auto n = static_cast<std::size_t>(std::min(step, to - at));
      const std::byte* bytes = chunks.view(file, path, at, n);
      if (bytes == nullptr)
        return false;  // shorter than fstat said: not ours to judge as empty
      if (std::any_of(bytes, bytes + n, [](std::byte b) { return b != std::byte{0}; }))
        return false;
      at += n;
    }
    return true;
  }

  // The newest segment may end in a torn frame (a process killed mid-append, or a power loss
  // before the sync). Only what provably holds no acknowledged record is cut: a frame the end
  // of the file cuts short, or zeros to the end of the file. Any other bad frame is corruption
  // of what may be acknowledged records: refused, and the file is left as it is.
  void recover_tail() {
    segment_info& last = segments_.back();
    const offset::value_type base = last.base.value();
    const auto path = path_of(last);
    detail::fd f = Io::open_file(path, O_RDWR);
    const std::uint64_t size = Io::file_size(f, path);
    chunk_reader chunks;
    if (size < segment_header_bytes || all_zero(chunks, f, path, 0, size)) {
      // Killed or powered off while creating the segment: its header never became durable,
      // and no record in it was ever acknowledged (a roll syncs the header before the first
      // append).
      Io::truncate_to(f, 0, path);
      write_segment_header(f, base, path);
      repaired_ = size;
      last.bytes = segment_header_bytes;
      end_ = base;
      return;
    }
    const std::byte* header = chunks.view(f, path, 0, segment_header_bytes);
    if (header == nullptr || !header_valid(header, base))
      throw corrupt_file(path, "the segment header does not name offset " + std::to_string(base));
    std::uint64_t pos = segment_header_bytes;
    offset::value_type at = base;
    while (pos < size) {
      const frame_result r = check_frame(chunks, f, path, pos, size, at);
      if (r.status == frame_status::ok) {
        pos += frame_header_bytes + r.length;
        ++at;
        continue;
      }
      if (r.status == frame_status::bad_checksum && !all_zero(chunks, f, path, pos, size))
        throw corrupt_file(path,
                           damaged_record(at, pos, pos + frame_header_bytes + r.length, size));
      break;  // a torn tail: cut short by the end of the file, or zeros
    }
    if (pos < size) {
      Io::truncate_to(f, pos, path);
      Io::sync_data(f, path);
      repaired_ = size - pos;
    }
    last.bytes = pos;
    end_ = at;
  }

  static std::string damaged_record(offset::value_type at, std::uint64_t pos,
                                    std::uint64_t frame_end, std::uint64_t size) {
    const std::string record = std::to_string(at);
    return "record " + record + " at byte " + std::to_string(pos) + " fails its checksum" +
           (frame_end < size ? " and " + std::to_string(size - frame_end) + " bytes follow it"
                             : ", though the file holds all of it") +
           ". It may be an acknowledged record, so the log does not repair it and will not "
           "open: restore the segment from a copy, or, if record " +
           record + " and all after it were never acknowledged, truncate the file to " +
           std::to_string(pos) + " bytes";
  }

  void roll() {
    // Room first, so that recording the new segment cannot fail once its file exists.
    segments_.reserve(segments_.size() + 1);
    // The segment being closed is complete and durable before its successor exists, so only
    // the newest segment can ever hold a torn frame (and the repair on open looks nowhere else).
    Io::sync_data(writer_, path_of(segments_.back()));
    const bool retry = roll_pending_;
    // Until the new segment is recorded, every append rolls first (see append()).
    roll_pending_ = true;
    writer_ = create_segment(end_, retry);
    segments_.push_back(segment_info{position{end_}, segment_header_bytes});
    roll_pending_ = false;
    if (options_.retention_bytes != 0) {
      std::uint64_t total = 0;
      for (const auto& s : segments_)
        total += s.bytes;
      std::size_t drop = 0;
      while (drop + 1 < segments_.size() && total > options_.retention_bytes)
        total -= segments_[drop++].bytes;
      drop_oldest(drop);
    }
  }

  void drop_oldest(std::size_t count) {
    if (count == 0)
      return;
    std::size_t removed = 0;
    try {
      for (; removed < count; ++removed)
        Io::remove_file(path_of(segments_[removed]));
    } catch (...) {
      // segments_ must never name a deleted file (earliest() would promise records that are
      // gone, and a read would fail on a missing file): forget what was deleted, keep the rest.
      forget_oldest(removed);
      throw;
    }
    forget_oldest(count);
    // A deletion that reappears after a power loss only lowers earliest() again: harmless,
    // but syncing keeps the retained range what this process reported.
    Io::sync_directory(dir_);
  }

  // Drops the first `count` entries of segments_. The reader is not moved: if its records were
  // deleted, its next poll() reports position_lost.
  void forget_oldest(std::size_t count) noexcept {
    if (count == 0)
      return;
    segments_.erase(segments_.begin(), segments_.begin() + static_cast<std::ptrdiff_t>(count));
    if (reader_.positioned) {
      if (reader_.segment < count)
        reader_.positioned = false;  // its file is gone from the list: find it again
      else
        reader_.segment -= count;
    }
  }

  std::size_t segment_holding(offset::value_type at) const {
    const auto it = std::ranges::upper_bound(segments_, position{at}, {}, &segment_info::base);
    return static_cast<std::size_t>(it - segments_.begin()) - 1;
  }

  void open_reader_segment(std::size_t index) {
    reader_.segment = index;
    reader_.path = path_of(segments_[index]);
    reader_.file = Io::open_file(reader_.path, O_RDONLY);
    reader_.chunks.reset();
    const std::byte* header =
        reader_.chunks.view(reader_.file, reader_.path, 0, segment_header_bytes);
    if (header == nullptr || !header_valid(header, segments_[index].base.value()))
      throw corrupt_file(reader_.path, "the segment header does not name offset " +
                                           std::to_string(segments_[index].base.value()));
    reader_.pos = segment_header_bytes;
  }

  // Makes reader_.file/pos point at the frame of reader_.next.
  void position_reader() {
    if (reader_.positioned) {
      const std::size_t following = reader_.segment + 1;
      if (following == segments_.size() || reader_.next < segments_[following].base.value())
        return;
      // A closed segment must end exactly where its successor begins.
      if (reader_.pos != segments_[reader_.segment].bytes)
        throw corrupt_file(reader_.path,
                           std::to_string(segments_[reader_.segment].bytes - reader_.pos) +
                               " bytes follow the segment's last record, offset " +
                               std::to_string(reader_.next - 1));
      open_reader_segment(following);
      return;
    }
    const offset::value_type target = reader_.next;
    open_reader_segment(segment_holding(target));
    reader_.next = segments_[reader_.segment].base.value();
    while (reader_.next < target)
      read_frame(false);
    reader_.positioned = true;
  }

  // Reads the frame of reader_.next (into the batch when `keep`), or throws: past the
  // repaired tail a frame that does not verify is corruption, never the end of the log.
  void read_frame(bool keep) {
    // A segment's size is what this process knows it to hold: the newest one grows with every
    // append, and nothing beyond an acknowledged frame is ever read.
    const frame_result r = check_frame(reader_.chunks, reader_.file, reader_.path, reader_.pos,
                                       segments_[reader_.segment].bytes, reader_.next);
    // The log never repairs a record before its tail: the remedy is a copy of the segment.
    switch (r.status) {
      case frame_status::ok:
        break;
      case frame_status::short_file:
        throw corrupt_file(reader_.path, "the segment ends inside or before record " +
                                             std::to_string(reader_.next) + " at byte " +
                                             std::to_string(reader_.pos) +
                                             "; restore the segment from a copy");
      case frame_status::bad_checksum:
        throw corrupt_file(reader_.path,
                           "record " + std::to_string(reader_.next) + " at byte " +
                               std::to_string(reader_.pos) +
                               " fails its checksum; restore the segment from a copy");
    }
    if (keep)
      batch_.push_back(record_type{offset{reader_.next}, codec_type::decode(r.payload)});
    reader_.pos += frame_header_bytes + r.length;
    ++reader_.next;
  }

  std::filesystem::path dir_;
  log_options options_;
  detail::fd lock_;
  std::vector<segment_info> segments_;
  detail::fd writer_;
  offset::value_type end_ = 0;
  std::uint64_t repaired_ = 0;
  bool broken_ = false;
  bool roll_pending_ = false;  // a roll failed: the next append must roll before it writes
  reader_state reader_;
  std::vector<record_type> batch_;
  std::vector<std::byte> frame_;
  std::vector<std::byte> scratch_;  // a record re-encoded for its fingerprint
};

}  // namespace commit_order::file
