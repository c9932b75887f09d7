// SPDX-License-Identifier: BSL-1.0
// The file log under power cuts: 40 appends of records of different sizes into 256-byte
// segments (so the cuts also fall inside segment rolls), cut at every sync point, recovered
// from the durable image alone and from the image plus a torn tail (a seeded prefix of the
// unsynced appended bytes, as a disk that wrote part of an append leaves it).
//
// After every cut: the log reopens; every append that returned before the cut is there and
// intact (under sync_each_append; under sync_on_flush, every append before the last flush that
// returned); nothing that was never appended appears; and the reopened log appends at the
// offset after its last record, which a second reopen reads back.
#include <doctest/doctest.h>

#include <commit_order/adapters/file.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "power_loss/cut_points.hpp"
#include "support/scratch.hpp"

namespace fs = std::filesystem;
namespace co = commit_order;

namespace {

struct note {
  std::int64_t seq = 0;
  std::string text;
  friend bool operator==(const note&, const note&) = default;
};

// Variable-length payloads: the cuts and the torn tails land at every kind of frame boundary.
struct note_codec {
  static void encode(const note& n, std::vector<std::byte>& out) {
    const auto* seq = reinterpret_cast<const std::byte*>(&n.seq);
    out.insert(out.end(), seq, seq + sizeof n.seq);
    const auto* text = reinterpret_cast<const std::byte*>(n.text.data());
    out.insert(out.end(), text, text + n.text.size());
  }
  static note decode(std::span<const std::byte> payload) {
    if (payload.size() < sizeof(std::int64_t))
      throw co::file::codec_error("a note is at least 8 bytes");
    note n;
    std::memcpy(&n.seq, payload.data(), sizeof n.seq);
    n.text.assign(reinterpret_cast<const char*>(payload.data()) + sizeof n.seq,
                  payload.size() - sizeof n.seq);
    return n;
  }
};

constexpr int appends = 40;
constexpr int flush_every = 4;

note note_at(std::int64_t i) {
  return note{
      i, std::string(static_cast<std::size_t>(3 + (i * 7) % 29), static_cast<char>('a' + i % 26))};
}

co::file::log_options options() {
  return co::file::log_options{.segment_bytes = 256};
}

struct acknowledged {
  std::int64_t appended = 0;  ///< appends that returned before the cut
  std::int64_t flushed = 0;   ///< appends covered by a flush() that returned before the cut
  bool in_flight = false;     ///< an append was under way when the power went out
};

template <class Sync>
using note_log = co::file::log<note, note_codec, Sync>;

template <class Sync>
acknowledged append_until_cut(const fs::path& dir) {
  acknowledged ack;
  note_log<Sync> log(dir, options());
  for (std::int64_t i = 0; i < appends; ++i) {
    if (power_loss::power_is_out())
      return ack;
    const co::offset at = log.append(note_at(i));
    if (power_loss::power_is_out()) {
      ack.in_flight = true;
      return ack;
    }
    if (at.value() != i)
      throw std::runtime_error("append " + std::to_string(i) + " returned offset " +
                               std::to_string(at.value()));
    ack.appended = i + 1;
    if constexpr (!Sync::each_append) {
      if ((i + 1) % flush_every == 0) {
        log.flush();
        if (power_loss::power_is_out())
          return ack;
        ack.flushed = i + 1;
      }
    }
  }
  return ack;
}

template <class Sync>
std::vector<note> read_all(note_log<Sync>& log) {
  std::vector<note> out;
  log.seek(log.earliest());
  for (;;) {
    const auto batch = log.poll(16);
    if (batch.empty())
      return out;
    for (const auto& r : batch) {
      if (r.source_offset.value() != static_cast<std::int64_t>(out.size()))
        throw std::runtime_error("record at offset " + std::to_string(r.source_offset.value()) +
                                 " read in position " + std::to_string(out.size()));
      out.push_back(r.event);
    }
  }
}

template <class Sync>
power_loss::findings check_log(const fs::path& dir, const acknowledged& ack) {
  power_loss::findings f;
  std::int64_t end = 0;
  {
    note_log<Sync> log(dir, options());
    end = log.end().value();
    if (log.repaired_tail_bytes() > 0)
      ++f.counts["torn tails cut off at reopen"];
    // What the log promises: every acknowledged append (sync_each_append), or every flushed one.
    const std::int64_t promised = Sync::each_append ? ack.appended : ack.flushed;
    if (end < promised)
      f.lost += promised - end;
    if (end < ack.appended)
      f.unacknowledged_lost += ack.appended - std::max(end, promised);
    const std::int64_t ever_written = ack.appended + (ack.in_flight ? 1 : 0);
    if (end > ever_written)
      f.problems.push_back("the log ends at " + std::to_string(end) + " but only " +
                           std::to_string(ever_written) + " appends were made");
    const auto records = read_all(log);
    for (std::size_t i = 0; i < records.size(); ++i)
      if (!(records[i] == note_at(static_cast<std::int64_t>(i))))
        f.problems.push_back("record " + std::to_string(i) + " is not what was appended");
    const note next{1000, "appended after the recovery"};
    const co::offset at = log.append(next);
    if (at.value() != end)
      f.problems.push_back("the reopened log appended at " + std::to_string(at.value()) +
                           ", after its last record " + std::to_string(end));
  }
  note_log<Sync> reopened(dir, options());
  const auto records = read_all(reopened);
  if (static_cast<std::int64_t>(records.size()) != end + 1 ||
      records.back().text != "appended after the recovery")
    f.problems.push_back("a second reopen does not read the append made after the recovery");
  return f;
}

template <class Sync>
power_loss::tally run(const std::string& name) {
  test_support::scratch_dir scratch;
  power_loss::cut_options o;
  o.tail_seeds = {0, 77};
  o.lost_label = "acknowledged appends lost";
  return power_loss::run_cut_points(
      name, scratch / "root", [](const fs::path&) {},
      [](const fs::path& root) { return append_until_cut<Sync>(root / "log"); },
      [](const fs::path& root, const acknowledged& ack) {
        return check_log<Sync>(root / "log", ack);
      },
      o);
}

}  // namespace

TEST_CASE("file log, sync_each_append: every append that returned survives every cut") {
  const auto t = run<co::file::sync_each_append>("file log (sync_each_append)");
  MESSAGE(t.summary());
  // One fdatasync per append plus the rolls: far more cut points than appends.
  CHECK(t.syncs > appends);
  CHECK(t.cut_points == t.syncs + 1);
  CHECK(t.lost == 0);
  CHECK(t.problem_count == 0);
  // The torn-tail recoveries did exercise the repair at open.
  CHECK(t.count("torn tails cut off at reopen") > 0);
}

TEST_CASE(
    "file log, sync_on_flush: every flushed append survives every cut, the rest is reported") {
  const auto t = run<co::file::sync_on_flush>("file log (sync_on_flush, flush every 4)");
  MESSAGE(t.summary());
  CHECK(t.syncs > appends / flush_every);
  CHECK(t.cut_points == t.syncs + 1);
  CHECK(t.lost == 0);
  CHECK(t.problem_count == 0);
  // Buffered appends do not survive a cut that comes before their flush: the tally shows it.
  CHECK(t.unacknowledged_lost > 0);
  CHECK(t.count("torn tails cut off at reopen") > 0);
}
