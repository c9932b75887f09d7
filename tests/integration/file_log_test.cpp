// The file log on a real file system: framing, torn tails, corruption, retention.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <commit_order/adapters/file.hpp>
#include <commit_order/commit_order.hpp>

#include "support/scratch.hpp"

namespace co = commit_order;
namespace fs = std::filesystem;
using test_support::scratch_dir;

namespace {

struct tick {
  std::int64_t seq = 0;
  std::int64_t value = 0;
  friend bool operator==(const tick&, const tick&) = default;
};
using tick_log = co::file::log<tick>;

static_assert(co::source<tick_log>);
static_assert(std::is_same_v<tick_log::append_durability, co::Synced>);
static_assert(std::is_same_v<co::file::log<tick, co::file::trivial_codec<tick>,
                                           co::file::sync_on_flush>::append_durability,
                             co::Buffered>);

tick tick_at(std::int64_t i) {
  return tick{i, i * 31 + 7};
}

std::vector<co::logged<tick>> read_all(tick_log& log) {
  log.seek(log.earliest());
  std::vector<co::logged<tick>> out;
  for (auto batch = log.poll(3); !batch.empty(); batch = log.poll(3))
    out.insert(out.end(), batch.begin(), batch.end());
  return out;
}

void append_bytes(const fs::path& file, const std::vector<unsigned char>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void flip_byte(const fs::path& file, std::uint64_t at) {
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x5a));
}

// 16-byte segment header + 8-byte frame header + 16-byte payload.
constexpr std::uint64_t frame_bytes = 8 + sizeof(tick);
constexpr std::uint64_t segment_of_four = 16 + 4 * frame_bytes;

}  // namespace

TEST_CASE("records survive a reopen, in order, across segments") {
  scratch_dir dir;
  {
    tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 10; ++i)
      CHECK(log.append(tick_at(i)) == co::offset{i});
    CHECK(log.segments().size() == 3);  // 4 + 4 + 2
  }
  tick_log log(dir.path(), {.segment_bytes = segment_of_four});
  CHECK(log.repaired_tail_bytes() == 0);
  CHECK(log.earliest() == co::position{0});
  CHECK(log.end() == co::position{10});
  const auto all = read_all(log);
  REQUIRE(all.size() == 10);
  for (std::int64_t i = 0; i < 10; ++i) {
    CHECK(all[static_cast<std::size_t>(i)].source_offset == co::offset{i});
    CHECK(all[static_cast<std::size_t>(i)].event == tick_at(i));
  }
  SUBCASE("seek lands on any record, including a segment boundary and the end") {
    for (std::int64_t p : {0, 3, 4, 5, 8, 9}) {
      log.seek(co::position{p});
      const auto batch = log.poll(1);
      REQUIRE(batch.size() == 1);
      CHECK(batch[0].event == tick_at(p));
    }
    log.seek(co::position{10});
    CHECK(log.poll(5).empty());
    CHECK_THROWS_AS(log.seek(co::position{11}), co::position_beyond_end);
  }
  SUBCASE("records appended after a poll are read by the next one") {
    log.seek(co::position{10});
    CHECK(log.poll(5).empty());
    log.append(tick_at(10));
    const auto batch = log.poll(5);
    REQUIRE(batch.size() == 1);
    CHECK(batch[0].source_offset == co::offset{10});
  }
}

TEST_CASE("a second log object on the same directory is refused") {
  scratch_dir dir;
  tick_log first(dir.path());
  CHECK_THROWS_AS(tick_log(dir.path()), co::file::log_busy);
}

TEST_CASE("a torn tail is cut off on open and never read as a record") {
  scratch_dir dir;
  fs::path tail;
  std::uint64_t clean_size = 0;
  {
    tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 6; ++i)
      log.append(tick_at(i));
    tail = log.segment_path(log.segments().back().base);
    clean_size = fs::file_size(tail);
  }

  std::vector<unsigned char> torn;
  SUBCASE("half a frame header") {
    torn = {0x10, 0x00, 0x00};
  }
  SUBCASE("a header and part of its payload") {
    torn = {0x10, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5};
  }
  SUBCASE("a whole frame whose checksum does not match") {
    torn = {0x10, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef};
    torn.resize(torn.size() + 16, 0x42);
  }
  SUBCASE("a length field torn into garbage") {
    torn = {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0};
  }
  SUBCASE("zeros, as a file system leaves an unsynced extension") {
    torn.assign(64, 0);
  }
  append_bytes(tail, torn);

  tick_log log(dir.path(), {.segment_bytes = segment_of_four});
  CHECK(log.repaired_tail_bytes() == torn.size());
  CHECK(fs::file_size(tail) == clean_size);
  CHECK(log.end() == co::position{6});
  const auto all = read_all(log);
  REQUIRE(all.size() == 6);
  CHECK(all.back().event == tick_at(5));
  // The log continues where the acknowledged records end.
  CHECK(log.append(tick_at(6)) == co::offset{6});
  log.seek(co::position{6});
  const auto batch = log.poll(10);
  REQUIRE(batch.size() == 1);
  CHECK(batch[0].event == tick_at(6));
}

TEST_CASE("a segment whose header never became durable is rewritten, not read") {
  scratch_dir dir;
  fs::path next;
  {
    tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 4; ++i)
      log.append(tick_at(i));
    next = log.segment_path(co::position{4});
  }
  // A process killed right after creating the next segment file.
  append_bytes(next, {'c', 'o', 'l'});
  tick_log log(dir.path(), {.segment_bytes = segment_of_four});
  CHECK(log.end() == co::position{4});
  CHECK(log.segments().size() == 2);
  CHECK(log.append(tick_at(4)) == co::offset{4});
  CHECK(read_all(log).size() == 5);
}

TEST_CASE("corruption before the tail is reported, never skipped or truncated") {
  scratch_dir dir;
  fs::path first;
  {
    tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 10; ++i)
      log.append(tick_at(i));
    first = log.segment_path(co::position{0});
  }
  const auto size_before = fs::file_size(first);
  flip_byte(first, 16 + frame_bytes + 8 + 3);  // inside the payload of record 1
  tick_log log(dir.path(), {.segment_bytes = segment_of_four});
  CHECK(log.end() == co::position{10});
  CHECK(fs::file_size(first) == size_before);
  log.seek(co::position{0});
  CHECK(log.poll(1).size() == 1);  // record 0 is intact
  CHECK_THROWS_WITH_AS(static_cast<void>(log.poll(1)),
                       doctest::Contains("record 1 fails its checksum"), co::file::corrupt_file);
  // Seeking past the damage still verifies it on the way: no silent skip either.
  log.seek(co::position{3});
  CHECK_THROWS_AS(static_cast<void>(log.poll(1)), co::file::corrupt_file);
  log.seek(co::position{4});  // the next segment is intact
  CHECK(log.poll(1).front().event == tick_at(4));
}

TEST_CASE("retention deletes whole old segments and moves earliest()") {
  scratch_dir dir;
  tick_log log(dir.path(), {.segment_bytes = segment_of_four});
  for (std::int64_t i = 0; i < 10; ++i)
    log.append(tick_at(i));

  SUBCASE("truncate_before keeps the segment that holds the position") {
    log.truncate_before(co::position{6});
    CHECK(log.earliest() == co::position{4});
    CHECK_FALSE(fs::exists(log.segment_path(co::position{0})));
    CHECK_THROWS_AS(log.seek(co::position{3}), co::position_lost);
    log.seek(co::position{4});
    CHECK(log.poll(1).front().event == tick_at(4));
  }
  SUBCASE("the segment being appended to is never deleted") {
    log.truncate_before(co::position{100});
    CHECK(log.earliest() == co::position{8});
    CHECK(log.end() == co::position{10});
  }
  SUBCASE("a reader in a deleted segment moves to earliest(), like memory::log") {
    log.seek(co::position{1});
    log.truncate_before(co::position{4});
    CHECK(log.read_position() == co::position{4});
    CHECK(log.poll(1).front().source_offset == co::offset{4});
  }
}

TEST_CASE("retention_bytes deletes old segments as the log grows, and survives a reopen") {
  scratch_dir dir;
  const co::file::log_options options{.segment_bytes = segment_of_four,
                                      .retention_bytes = 3 * segment_of_four};
  {
    tick_log log(dir.path(), options);
    for (std::int64_t i = 0; i < 40; ++i)
      log.append(tick_at(i));
    // Two full segments and the active one fit in the budget, a third full one does not.
    CHECK(log.segments().size() == 3);
    CHECK(log.earliest() == co::position{28});
    CHECK_FALSE(fs::exists(log.segment_path(co::position{24})));
  }
  tick_log log(dir.path(), options);
  CHECK(log.earliest() == co::position{28});
  CHECK(log.end() == co::position{40});
  CHECK(read_all(log).front().event == tick_at(28));
}

namespace {

// A codec for large events, so a SIGKILL can land in the middle of one write(2): the kernel
// stops copying a large write between pages when the process has a fatal signal pending.
struct blob {
  std::int64_t seq = 0;
  std::uint32_t bytes = 0;
};
struct blob_codec {
  static std::byte fill(std::int64_t seq, std::size_t i) {
    return static_cast<std::byte>((static_cast<std::size_t>(seq) * 131 + i * 7) & 0xff);
  }
  static void encode(const blob& b, std::vector<std::byte>& out) {
    std::array<std::byte, 12> head{};
    std::memcpy(head.data(), &b.seq, 8);
    std::memcpy(head.data() + 8, &b.bytes, 4);
    out.insert(out.end(), head.begin(), head.end());
    const std::size_t at = out.size();
    out.resize(at + b.bytes);
    for (std::size_t i = 0; i < b.bytes; ++i)
      out[at + i] = fill(b.seq, i);
  }
  static blob decode(std::span<const std::byte> in) {
    blob b;
    if (in.size() < 12)
      throw co::file::codec_error("short blob");
    std::memcpy(&b.seq, in.data(), 8);
    std::memcpy(&b.bytes, in.data() + 8, 4);
    if (in.size() != 12 + b.bytes)
      throw co::file::codec_error("blob size mismatch");
    for (std::size_t i = 0; i < b.bytes; ++i)
      if (in[12 + i] != fill(b.seq, i))
        throw co::file::codec_error("blob content mismatch");
    return b;
  }
};
using blob_log = co::file::log<blob, blob_codec, co::file::sync_on_flush>;
static_assert(co::file::codec<blob_codec, blob>);

}  // namespace

TEST_CASE("a writer SIGKILLed mid-append leaves a log that reopens consistent") {
  scratch_dir dir;
  // Retention keeps the disk use of the test to a few segments.
  const co::file::log_options options{
      .segment_bytes = 2u << 20, .retention_bytes = 8u << 20, .max_record_bytes = 2u << 20};
  std::mt19937 rng(42);
  std::int64_t acknowledged = 0;  // the end an earlier reopen showed
  int repaired = 0;
  for (int round = 0; round < 12; ++round) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // The writer: appends large blobs until it is killed. It must never return into the
      // test runner's copy of itself.
      try {
        blob_log log(dir.path(), options);
        for (std::int64_t seq = log.end().value();; ++seq)
          log.append(blob{seq, static_cast<std::uint32_t>((256u << 10) + (seq % 13) * 61440)});
      } catch (...) {
        ::_exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 40));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));

    blob_log log(dir.path(), options);
    repaired += log.repaired_tail_bytes() > 0 ? 1 : 0;
    // The log never ends before what an earlier reopen showed, and every retained record
    // decodes (the codec checks every byte) at the offset its sequence names.
    CHECK(log.end().value() >= acknowledged);
    log.seek(log.earliest());
    std::int64_t expect = log.earliest().value();
    for (auto batch = log.poll(4); !batch.empty(); batch = log.poll(4))
      for (const auto& r : batch) {
        CHECK(r.source_offset.value() == expect);
        CHECK(r.event.seq == expect);
        ++expect;
      }
    CHECK(expect == log.end().value());
    acknowledged = log.end().value();
  }
  MESSAGE(repaired << " of 12 kills left a torn frame that the reopen cut off");
}
