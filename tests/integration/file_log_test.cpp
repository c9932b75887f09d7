// SPDX-License-Identifier: BSL-1.0
// The file log on a real file system: framing, torn tails, corruption, retention.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <commit_order/adapters/file.hpp>
#include <commit_order/commit_order.hpp>

#include "support/orders.hpp"
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
  SUBCASE("a length field torn into garbage") {
    torn = {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0};
  }
  SUBCASE("zeros, as a file system leaves an unsynced extension") {
    torn.assign(64, 0);
  }
  SUBCASE("fewer zeros than a frame header") {
    torn.assign(5, 0);
  }
  SUBCASE("a frame header promising more payload than there is, then zeros") {
    torn = {0x10, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0};
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

namespace {
std::vector<char> file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("a damaged record followed by more records makes the open refuse; nothing is cut") {
  scratch_dir dir;
  fs::path segment;
  {
    tick_log log(dir.path());
    for (std::int64_t i = 0; i < 10; ++i)
      log.append(tick_at(i));
    segment = log.segment_path(co::position{0});
  }
  constexpr std::uint64_t record_2 = 16 + 2 * frame_bytes;  // byte 64
  SUBCASE("a flipped byte in the payload") {
    flip_byte(segment, record_2 + 8 + 3);
  }
  SUBCASE("a flipped byte in the checksum") {
    flip_byte(segment, record_2 + 5);
  }
  SUBCASE("a flipped byte in the length: the frame still ends inside the file") {
    flip_byte(segment, record_2);  // 16 -> 74 bytes
  }
  const auto before = file_bytes(segment);
  try {
    tick_log log(dir.path());
    FAIL("the log opened over a damaged record; end() = " << log.end().value());
  } catch (const co::file::corrupt_file& e) {
    const std::string what = e.what();
    CHECK(what.find(segment.string()) != std::string::npos);
    CHECK(what.find("record 2") != std::string::npos);
    CHECK(what.find("byte 64") != std::string::npos);
  }
  // Eight acknowledged records after the damage are still on disk, byte for byte.
  CHECK(file_bytes(segment) == before);
  // A typed infrastructure failure: never the record's fault, never dead-lettered.
  static_assert(std::is_base_of_v<co::infrastructure_error, co::file::corrupt_file>);
}

TEST_CASE("a complete last frame that fails its checksum is corruption, not a torn tail") {
  // Its bytes are all there: it may be an acknowledged record that was damaged later, and a
  // write killed midway leaves a frame cut short, not a whole one with other bytes. Zeros after
  // it do not make it a torn tail either: only zeros from the bad frame on do.
  scratch_dir dir;
  fs::path tail;
  {
    tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 6; ++i)
      log.append(tick_at(i));
    tail = log.segment_path(log.segments().back().base);
  }
  SUBCASE("the last acknowledged record, one byte flipped") {
    flip_byte(tail, 16 + frame_bytes + 8);
  }
  SUBCASE("a whole frame of other bytes after the last record") {
    std::vector<unsigned char> other = {0x10, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef};
    other.resize(other.size() + 16, 0x42);
    append_bytes(tail, other);
  }
  SUBCASE("a whole frame of other bytes, then zeros") {
    std::vector<unsigned char> other = {0x10, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef};
    other.resize(other.size() + 16, 0x42);
    other.resize(other.size() + 64, 0);
    append_bytes(tail, other);
  }
  const auto before = file_bytes(tail);
  CHECK_THROWS_WITH_AS(tick_log(dir.path(), {.segment_bytes = segment_of_four}),
                       doctest::Contains("fails its checksum"), co::file::corrupt_file);
  CHECK(file_bytes(tail) == before);
}

TEST_CASE("max_record_bytes limits appends only: a smaller value on reopen cuts nothing") {
  scratch_dir dir;
  std::vector<std::uintmax_t> sizes;
  {
    tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 10; ++i)
      log.append(tick_at(i));
    for (const auto& s : log.segments())
      sizes.push_back(fs::file_size(log.segment_path(s.base)));
  }
  // Every record holds 16 bytes; the reopened log would refuse to append one of them.
  tick_log log(dir.path(), {.segment_bytes = segment_of_four, .max_record_bytes = 8});
  CHECK(log.repaired_tail_bytes() == 0);
  CHECK(log.end() == co::position{10});
  REQUIRE(log.segments().size() == sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i)
    CHECK(fs::file_size(log.segment_path(log.segments()[i].base)) == sizes[i]);
  // A record that verifies is read whatever its size, in closed segments and the newest one.
  const auto all = read_all(log);
  REQUIRE(all.size() == 10);
  for (std::int64_t i = 0; i < 10; ++i)
    CHECK(all[static_cast<std::size_t>(i)].event == tick_at(i));
  CHECK_THROWS_AS(log.append(tick_at(10)), co::file::codec_error);
  CHECK(log.end() == co::position{10});
}

TEST_CASE("a newest segment of zeros never held a record and is rewritten") {
  // A power cut after a roll created the file and extended it, before its header was synced:
  // the file system shows zeros. No record in it was acknowledged (the header is synced first).
  scratch_dir dir;
  fs::path next;
  {
    tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 4; ++i)
      log.append(tick_at(i));
    next = log.segment_path(co::position{4});
  }
  append_bytes(next, std::vector<unsigned char>(16 + frame_bytes, 0));
  tick_log log(dir.path(), {.segment_bytes = segment_of_four});
  CHECK(log.repaired_tail_bytes() == 16 + frame_bytes);
  CHECK(log.end() == co::position{4});
  CHECK(log.append(tick_at(4)) == co::offset{4});
  CHECK(read_all(log).size() == 5);
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
                       doctest::Contains("record 1 at byte 40 fails its checksum"),
                       co::file::corrupt_file);
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
  SUBCASE("a reader in a deleted segment gets position_lost, like memory::log") {
    log.seek(co::position{1});
    log.truncate_before(co::position{4});
    // Moving it to earliest() would skip records 1..3 without a word.
    CHECK(log.read_position() == co::position{1});
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        static_cast<void>(log.poll(1));
        FAIL("a reader behind earliest() read on");
      } catch (const co::position_lost& e) {
        CHECK(e.stored() == co::position{1});
        CHECK(e.earliest() == co::position{4});
      }
      CHECK(log.read_position() == co::position{1});  // never a jump, however often it polls
    }
    // Only an explicit seek moves it on.
    log.seek(co::position{4});
    CHECK(log.poll(1).front().source_offset == co::offset{4});
  }
  SUBCASE("a reader past the deleted segments reads on undisturbed") {
    log.seek(co::position{5});
    CHECK(log.poll(1).front().source_offset == co::offset{5});
    log.truncate_before(co::position{4});
    std::vector<std::int64_t> read;
    for (auto batch = log.poll(2); !batch.empty(); batch = log.poll(2))
      for (const auto& r : batch)
        read.push_back(r.source_offset.value());
    CHECK(read == std::vector<std::int64_t>{6, 7, 8, 9});
  }
}

TEST_CASE("retention_bytes during appends leaves a lagging reader behind, never moves it") {
  scratch_dir dir;
  tick_log log(dir.path(),
               {.segment_bytes = segment_of_four, .retention_bytes = 3 * segment_of_four});
  for (std::int64_t i = 0; i < 6; ++i)
    log.append(tick_at(i));
  REQUIRE(log.poll(2).size() == 2);  // the reader is at 2
  for (std::int64_t i = 6; i < 40; ++i)
    log.append(tick_at(i));
  REQUIRE(log.earliest() == co::position{28});
  CHECK(log.read_position() == co::position{2});
  try {
    static_cast<void>(log.poll(4));
    FAIL("the reader skipped the records retention deleted");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == co::position{2});
    CHECK(e.earliest() == co::position{28});
  }
}

TEST_CASE("AtLeastOnce over a file log with retention: a lagging consumer is position_lost") {
  // The consumer reads 4 records, then the producer appends 36 more while it is busy; the
  // retention budget (3 segments of 4 records) deletes records 4..27 before they are read.
  using order_file_log = co::file::log<test_support::order_event>;
  using pipeline_t = co::pipeline<order_file_log, test_support::guarded_table, co::AtLeastOnce<>,
                                  co::with_store<test_support::store>>;
  constexpr std::uint64_t order_frame = 8 + sizeof(test_support::order_event);
  const co::file::log_options options{.segment_bytes = 16 + 4 * order_frame,
                                      .retention_bytes = 3 * (16 + 4 * order_frame)};
  const auto append = [](order_file_log& log, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t at = log.end().value();
      log.append(test_support::order_event{at, 100, at * 10});
    }
  };
  scratch_dir dir;
  test_support::guarded_table table;
  test_support::store store;
  {
    order_file_log log(dir.path(), options);
    append(log, 8);
    pipeline_t p(log, table, store, co::settings{.batch_size = 4});
    CHECK(p.poll_once() == 4);
    REQUIRE(store.load() == co::position{4});
    append(log, 32);
    REQUIRE(log.earliest() == co::position{28});
    // Without the check the pipeline reads 28..39 and stores 40: 24 records silently lost.
    try {
      p.run();
      FAIL("the pipeline read past records retention deleted: "
           << table.size() << " of 40 records applied, stored position "
           << store.load().value_or(co::position{}).value());
    } catch (const co::position_lost& e) {
      CHECK(e.stored() == co::position{4});
      CHECK(e.earliest() == co::position{28});
    }
    CHECK(store.load() == co::position{4});
    CHECK(table.size() == 4);
    // Polling again recovers from the stored position, which is still behind: the same error.
    CHECK_THROWS_AS(p.poll_once(), co::position_lost);
    CHECK(store.load() == co::position{4});
  }
  // A restart over the reopened log refuses too: the gap is reported, never jumped.
  order_file_log log(dir.path(), options);
  pipeline_t restarted(log, table, store, co::settings{.batch_size = 4});
  try {
    restarted.recover();
    FAIL("the restart resumed from a position the log no longer holds");
  } catch (const co::position_lost& e) {
    CHECK(e.stored() == co::position{4});
    CHECK(e.earliest() == co::position{28});
  }
  CHECK(store.load() == co::position{4});
  CHECK(table.size() == 4);
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

namespace {

// Fault injection through the log's Io seam: the named system call fails once, on its
// `skip`-th next call, as a full disk or a failing device makes it fail.
struct io_fault {
  enum class op { none, write, sync_data, sync_directory, remove_file };
  static inline op planned = op::none;
  static inline int skip = 0;
  static inline int fired = 0;

  static void plan(op o, int after = 0) {
    planned = o;
    skip = after;
  }
  static bool hit(op o) {
    if (planned != o)
      return false;
    if (skip-- > 0)
      return false;
    planned = op::none;
    ++fired;
    return true;
  }
};

// Resets the plan even when a check fails, so one test's fault never fires in the next.
struct io_fault_scope {
  io_fault_scope() {
    io_fault::planned = io_fault::op::none;
    io_fault::fired = 0;
  }
  ~io_fault_scope() { io_fault::planned = io_fault::op::none; }
  io_fault_scope(const io_fault_scope&) = delete;
  io_fault_scope& operator=(const io_fault_scope&) = delete;
};

struct faulty_io : co::file::detail::system_io {
  using fd = co::file::detail::fd;
  static void write_all(const fd& f, std::span<const std::byte> bytes, const fs::path& path) {
    if (io_fault::hit(io_fault::op::write)) {
      // The disk fills up midway: half of the bytes reach the file.
      system_io::write_all(f, bytes.first(bytes.size() / 2), path);
      throw co::file::io_error("write", path, ENOSPC);
    }
    system_io::write_all(f, bytes, path);
  }
  static void sync_data(const fd& f, const fs::path& path) {
    if (io_fault::hit(io_fault::op::sync_data))
      throw co::file::io_error("fdatasync", path, EIO);
    system_io::sync_data(f, path);
  }
  static void sync_directory(const fs::path& dir) {
    if (io_fault::hit(io_fault::op::sync_directory))
      throw co::file::io_error("fsync", dir, EIO);
    system_io::sync_directory(dir);
  }
  static void remove_file(const fs::path& path) {
    if (io_fault::hit(io_fault::op::remove_file))
      throw co::file::io_error("unlink", path, EIO);
    system_io::remove_file(path);
  }
};

using faulty_tick_log =
    co::file::log<tick, co::file::trivial_codec<tick>, co::file::sync_each_append, faulty_io>;

std::vector<co::logged<tick>> read_all(faulty_tick_log& log) {
  log.seek(log.earliest());
  std::vector<co::logged<tick>> out;
  for (auto batch = log.poll(3); !batch.empty(); batch = log.poll(3))
    out.insert(out.end(), batch.begin(), batch.end());
  return out;
}

void check_ticks(const std::vector<co::logged<tick>>& all, std::int64_t from, std::int64_t to) {
  REQUIRE(all.size() == static_cast<std::size_t>(to - from));
  for (std::int64_t i = from; i < to; ++i) {
    CHECK(all[static_cast<std::size_t>(i - from)].source_offset == co::offset{i});
    CHECK(all[static_cast<std::size_t>(i - from)].event == tick_at(i));
  }
}

void check_segments_exist(const faulty_tick_log& log) {
  for (const auto& s : log.segments()) {
    INFO("segment " << s.base.value());
    CHECK(fs::exists(log.segment_path(s.base)));
  }
}

}  // namespace

TEST_CASE("a segment roll that fails after creating the file leaves the log appendable") {
  struct fault {
    const char* what;
    io_fault::op op;
    int after;
  };
  // The roll for record 4 creates 00000000000000000004.log, then fails.
  const std::array faults{
      fault{"the directory fsync that makes the new file durable fails",
            io_fault::op::sync_directory, 0},
      fault{"the disk fills up while the new segment's header is written", io_fault::op::write, 0},
      // The first fdatasync of a roll closes the old segment; the second is the header's.
      fault{"the fdatasync of the new segment's header fails", io_fault::op::sync_data, 1},
  };
  const co::file::log_options options{.segment_bytes = segment_of_four};
  for (const fault& f : faults) {
    for (const bool reopen : {false, true}) {
      const std::string what = f.what;
      CAPTURE(what);
      CAPTURE(reopen);  // false: the next append retries the roll; true: a reopen first
      io_fault_scope scope;
      scratch_dir dir;
      std::optional<faulty_tick_log> log(std::in_place, dir.path(), options);
      for (std::int64_t i = 0; i < 4; ++i)
        log->append(tick_at(i));
      io_fault::plan(f.op, f.after);
      CHECK_THROWS_AS(log->append(tick_at(4)), co::file::io_error);
      REQUIRE(io_fault::fired == 1);
      CHECK(log->end() == co::position{4});
      if (reopen) {
        // The half-made segment is the newest file: the reopen continues in it.
        log.reset();
        log.emplace(dir.path(), options);
        CHECK(log->end() == co::position{4});
      }
      // Not "File exists": the log goes on, and every record lands at its offset.
      for (std::int64_t i = 4; i < 10; ++i)
        CHECK(log->append(tick_at(i)) == co::offset{i});
      CHECK(log->segments().size() == 3);
      check_segments_exist(*log);
      check_ticks(read_all(*log), 0, 10);
      log.reset();
      faulty_tick_log reopened(dir.path(), options);
      CHECK(reopened.repaired_tail_bytes() == 0);
      check_ticks(read_all(reopened), 0, 10);
    }
  }
}

namespace {
using faulty_blob_log = co::file::log<blob, blob_codec, co::file::sync_each_append, faulty_io>;
}  // namespace

TEST_CASE("after a failed roll, no record goes into the segment the roll was closing") {
  // A smaller record would fit in the old segment; appended there, it would sit below the
  // half-made segment's base, and a reopen would take that base for the end of the log.
  io_fault_scope faults;
  scratch_dir dir;
  const co::file::log_options options{.segment_bytes = 16 + 2 * (8 + 12 + 100)};
  std::optional<faulty_blob_log> log(std::in_place, dir.path(), options);
  log->append(blob{0, 100});
  log->append(blob{1, 50});
  const auto old_size = fs::file_size(log->segment_path(co::position{0}));
  io_fault::plan(io_fault::op::sync_directory);
  CHECK_THROWS_AS(log->append(blob{2, 100}), co::file::io_error);  // needs a roll
  CHECK(log->append(blob{2, 10}) == co::offset{2});                // would fit in segment 0
  CHECK(fs::file_size(log->segment_path(co::position{0})) == old_size);
  CHECK(log->segments().back().base == co::position{2});
  log.reset();
  faulty_blob_log reopened(dir.path(), options);
  CHECK(reopened.end() == co::position{3});
  reopened.seek(co::position{0});
  std::int64_t expect = 0;
  for (auto batch = reopened.poll(2); !batch.empty(); batch = reopened.poll(2))
    for (const auto& r : batch)
      CHECK(r.event.seq == expect++);
  CHECK(expect == 3);
}

TEST_CASE("retention that fails midway keeps segments() to the files that exist") {
  io_fault_scope faults;
  scratch_dir dir;

  SUBCASE("truncate_before: the second of two unlinks fails") {
    faulty_tick_log log(dir.path(), {.segment_bytes = segment_of_four});
    for (std::int64_t i = 0; i < 10; ++i)
      log.append(tick_at(i));
    io_fault::plan(io_fault::op::remove_file, 1);
    CHECK_THROWS_AS(log.truncate_before(co::position{9}), co::file::io_error);
    REQUIRE(io_fault::fired == 1);
    CHECK(log.earliest() == co::position{4});
    check_segments_exist(log);
    check_ticks(read_all(log), 4, 10);
    // The next call finishes the job.
    log.truncate_before(co::position{9});
    CHECK(log.earliest() == co::position{8});
    check_segments_exist(log);
    check_ticks(read_all(log), 8, 10);
  }
  SUBCASE("retention_bytes: an unlink fails during an append's roll") {
    const co::file::log_options options{.segment_bytes = segment_of_four,
                                        .retention_bytes = 3 * segment_of_four};
    faulty_tick_log log(dir.path(), options);
    for (std::int64_t i = 0; i < 12; ++i)
      log.append(tick_at(i));
    io_fault::plan(io_fault::op::remove_file);
    // The roll itself succeeded; deleting segment 0 did not, and the append reports it.
    CHECK_THROWS_AS(log.append(tick_at(12)), co::file::io_error);
    REQUIRE(io_fault::fired == 1);
    CHECK(log.earliest() == co::position{0});
    check_segments_exist(log);
    for (std::int64_t i = 12; i < 20; ++i)
      CHECK(log.append(tick_at(i)) == co::offset{i});
    // Later rolls enforce the budget again.
    CHECK(log.earliest() == co::position{8});
    check_segments_exist(log);
    check_ticks(read_all(log), 8, 20);
  }
}
