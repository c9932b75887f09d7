// SPDX-License-Identifier: BSL-1.0
// The power-cut shim itself, on plain file operations: each case is one rule of its model
// (see shim/power_cut_shim.cpp), checked both ways — without the sync that makes it durable the
// change is undone at the cut, with it the change survives.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "power_loss/power_cut.hpp"
#include "support/scratch.hpp"

namespace fs = std::filesystem;

extern char** environ;

namespace {

class file final {
 public:
  file(const fs::path& path, int flags) : fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
    if (fd_ < 0)
      throw std::runtime_error("open " + path.string() + ": " + std::to_string(errno));
  }
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  ~file() { close(); }

  void write(const std::string& bytes) {
    REQUIRE(::write(fd_, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  }
  void fsync() { REQUIRE(::fsync(fd_) == 0); }
  void fdatasync() { REQUIRE(::fdatasync(fd_) == 0); }
  void truncate(off_t size) { REQUIRE(::ftruncate(fd_, size) == 0); }
  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Writes `bytes` to a (new or truncated) file, fsync'ed or not, and closes it.
void put(const fs::path& path, const std::string& bytes, bool sync) {
  file f(path, O_WRONLY | O_CREAT | O_TRUNC);
  f.write(bytes);
  if (sync)
    f.fsync();
}

void sync_directory(const fs::path& dir) {
  file d(dir, O_RDONLY | O_DIRECTORY);
  d.fsync();
}

std::optional<std::string> read(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    return std::nullopt;
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0)
    out.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// A root the shim watches, inside a scratch directory (so a path outside the root exists too).
struct watched_root {
  test_support::scratch_dir scratch;
  fs::path root = scratch / "root";
  power_loss::shim& power = power_loss::shim::get();

  watched_root() { fs::create_directories(root); }
  void watch() { power.watch(root); }
};

}  // namespace

TEST_CASE("shim: a write never synced is gone at the cut, and a durable file keeps its bytes") {
  watched_root w;
  put(w.root / "old", "v1", false);
  w.watch();  // "old" holding "v1" is the durable starting state
  put(w.root / "new", "never synced", false);
  put(w.root / "old", "v2, longer than v1", false);
  w.power.materialise();
  CHECK_FALSE(read(w.root / "new").has_value());
  CHECK(read(w.root / "old") == "v1");
}

TEST_CASE("shim: a new file fsync'ed without a directory sync vanishes, with one it survives") {
  watched_root w;
  w.watch();
  put(w.root / "f", "synced data", true);
  w.power.materialise();
  CHECK_FALSE(read(w.root / "f").has_value());

  put(w.root / "f", "synced data", true);
  sync_directory(w.root);
  {
    file f(w.root / "f", O_WRONLY | O_APPEND);
    f.write(" and an append never synced");
  }
  w.power.materialise();
  CHECK(read(w.root / "f") == "synced data");
}

TEST_CASE("shim: a durable name whose content was never synced is an empty file") {
  watched_root w;
  w.watch();
  put(w.root / "f", "written, not synced", false);
  sync_directory(w.root);
  w.power.materialise();
  CHECK(read(w.root / "f") == "");
}

TEST_CASE("shim: a rename without a directory sync leaves the old name and content") {
  watched_root w;
  put(w.root / "position", "1", false);
  w.watch();
  // The position store's protocol without its last step.
  put(w.root / "position.tmp", "2", true);
  fs::rename(w.root / "position.tmp", w.root / "position");
  w.power.materialise();
  CHECK(read(w.root / "position") == "1");
  CHECK_FALSE(read(w.root / "position.tmp").has_value());

  put(w.root / "position.tmp", "2", true);
  fs::rename(w.root / "position.tmp", w.root / "position");
  sync_directory(w.root);
  w.power.materialise();
  CHECK(read(w.root / "position") == "2");
  CHECK_FALSE(read(w.root / "position.tmp").has_value());
}

TEST_CASE("shim: an unlink without a directory sync is undone: the file comes back") {
  watched_root w;
  put(w.root / "journal", "hot journal", false);
  w.watch();
  fs::remove(w.root / "journal");
  w.power.materialise();
  CHECK(read(w.root / "journal") == "hot journal");

  fs::remove(w.root / "journal");
  sync_directory(w.root);
  w.power.materialise();
  CHECK_FALSE(read(w.root / "journal").has_value());
}

TEST_CASE("shim: an unlinked file comes back with its own bytes even if its inode is reused") {
  watched_root w;
  put(w.root / "old", "the old file", false);
  struct stat before {};
  REQUIRE(::stat((w.root / "old").c_str(), &before) == 0);
  w.watch();
  fs::remove(w.root / "old");
  put(w.root / "new", "the new file", true);  // may get the old inode number
  struct stat after {};
  REQUIRE(::stat((w.root / "new").c_str(), &after) == 0);
  MESSAGE("the inode number was " << (after.st_ino == before.st_ino ? "" : "not ")
                                  << "reused on this file system");
  w.power.materialise();
  CHECK(read(w.root / "old") == "the old file");
  CHECK_FALSE(read(w.root / "new").has_value());
}

TEST_CASE("shim: ftruncate without a sync keeps the old length, with one the new length") {
  watched_root w;
  put(w.root / "f", "0123456789", false);
  w.watch();
  {
    file f(w.root / "f", O_RDWR);
    f.truncate(4);
  }
  w.power.materialise();
  CHECK(read(w.root / "f") == "0123456789");
  {
    file f(w.root / "f", O_RDWR);
    f.truncate(4);
    f.fdatasync();
  }
  w.power.materialise();
  CHECK(read(w.root / "f") == "0123");
}

TEST_CASE("shim: the cut at sync N: that sync and every later one make nothing durable") {
  watched_root w;
  put(w.root / "f", "0", false);
  w.watch();
  w.power.arm(3);
  std::vector<bool> out_after;
  for (int i = 1; i <= 5; ++i) {
    file f(w.root / "f", O_WRONLY | O_TRUNC);
    f.write(std::to_string(i));
    f.fsync();  // sync point i: returns success also once the power is out
    out_after.push_back(w.power.cut());
  }
  CHECK(out_after == std::vector<bool>{false, false, true, true, true});
  CHECK(w.power.syncs() == 5);
  w.power.materialise();
  CHECK(read(w.root / "f") == "2");  // as of sync point 2, the last before the cut
}

TEST_CASE("shim: a directory synced inside but not in its parent vanishes with its files") {
  watched_root w;
  w.watch();
  fs::create_directory(w.root / "sub");
  put(w.root / "sub" / "f", "inside", true);
  sync_directory(w.root / "sub");
  w.power.materialise();
  CHECK_FALSE(fs::exists(w.root / "sub"));

  fs::create_directory(w.root / "sub");
  put(w.root / "sub" / "f", "inside", true);
  sync_directory(w.root);  // "sub" is durable, its own listing is not yet
  w.power.materialise();
  CHECK(fs::is_directory(w.root / "sub"));
  CHECK_FALSE(read(w.root / "sub" / "f").has_value());

  put(w.root / "sub" / "f", "inside", true);
  sync_directory(w.root / "sub");
  w.power.materialise();
  CHECK(read(w.root / "sub" / "f") == "inside");
}

TEST_CASE("shim: fdatasync of a directory is a directory sync (SQLite syncs directories so)") {
  watched_root w;
  w.watch();
  put(w.root / "f", "data", true);
  {
    file d(w.root, O_RDONLY | O_DIRECTORY);
    d.fdatasync();
  }
  CHECK(w.power.syncs() == 2);
  w.power.materialise();
  CHECK(read(w.root / "f") == "data");
}

TEST_CASE("shim: files outside the root are neither counted nor rewritten") {
  watched_root w;
  w.watch();
  put(w.scratch / "outside", "not watched", true);
  sync_directory(w.scratch.path());
  CHECK(w.power.syncs() == 0);
  put(w.scratch / "outside", "still not watched", false);
  w.power.materialise();
  CHECK(read(w.scratch / "outside") == "still not watched");
}

TEST_CASE("shim: materialising refuses while a file under the root is open") {
  watched_root w;
  w.watch();
  file f(w.root / "f", O_WRONLY | O_CREAT);
  CHECK_THROWS_WITH_AS(w.power.materialise(), doctest::Contains("still open"), std::runtime_error);
  f.close();
  CHECK_NOTHROW(w.power.materialise());
}

TEST_CASE(
    "shim: with a tail seed, a prefix of the unsynced appended bytes survives (torn append)") {
  watched_root w;
  const std::string durable = "ABC";
  const std::string appended = "0123456789";
  std::set<std::size_t> kept;
  for (std::uint64_t seed = 0; seed <= 40; ++seed) {
    put(w.root / "f", durable, false);
    w.watch();
    {
      file f(w.root / "f", O_WRONLY | O_APPEND);
      f.write(appended);
    }
    w.power.materialise(seed);
    const auto got = read(w.root / "f");
    REQUIRE(got.has_value());
    REQUIRE(got->size() >= durable.size());
    CHECK(*got == (durable + appended).substr(0, got->size()));
    if (seed == 0)
      CHECK(*got == durable);
    else
      kept.insert(got->size() - durable.size());
  }
  // Torn anywhere: nothing, part of the append, all of it.
  CHECK(kept.size() >= 4);
  CHECK(*kept.begin() < appended.size());
  CHECK(*kept.rbegin() > 0);

  // An overwrite is not an append: it is never torn into the image.
  put(w.root / "f", "0123456789", false);
  w.watch();
  {
    file f(w.root / "f", O_WRONLY);
    f.write("xyz");
  }
  w.power.materialise(7);
  CHECK(read(w.root / "f") == "0123456789");
}

TEST_CASE("shim: a torn append never holds bytes written after the cut") {
  watched_root w;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    put(w.root / "f", "ABC", false);
    put(w.root / "other", "", false);
    w.watch();
    w.power.arm(1);
    file f(w.root / "f", O_WRONLY | O_APPEND);
    f.write("0123");
    put(w.root / "other", "x", true);  // sync point 1: the power goes out
    REQUIRE(w.power.cut());
    f.write("written after the cut");
    f.close();
    w.power.materialise(seed);
    const auto got = read(w.root / "f");
    REQUIRE(got.has_value());
    CHECK(got->size() >= 3);
    CHECK(got->size() <= 7);
    CHECK(*got == std::string("ABC0123").substr(0, got->size()));
  }
}

namespace {
// Runs `argv` with `extra` added to this process's environment; returns its exit status.
int spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra) {
  std::vector<std::string> env_strings(extra);
  // Leak checking is for our own code, not for a system tool the sanitizer is preloaded into.
  env_strings.emplace_back("ASAN_OPTIONS=detect_leaks=0");
  const auto overridden = [&](const std::string& entry) {
    for (const auto& e : env_strings)
      if (entry.substr(0, entry.find('=')) == e.substr(0, e.find('=')))
        return true;
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e)
    if (!overridden(*e))
      env_strings.emplace_back(*e);
  std::vector<char*> args, env;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env_strings)
    env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, argv[0].c_str(), nullptr, nullptr, args.data(), env.data()) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}
}  // namespace

TEST_CASE("shim: a program run under the shim alone (environment only) is cut at its exit") {
  // dd's conv=fsync syncs the file, never its directory: the name dd created is not durable.
  // (A block of a whole page: under the asan preset the sanitizer's runtime is preloaded into dd
  // as well, and it refuses the page-aligned allocation dd makes for a smaller block.)
  watched_root w;
  const std::string dd = "/bin/dd";
  REQUIRE(fs::exists(dd));
  const std::vector<std::string> env{"COMMIT_ORDER_POWER_CUT_ROOT=" + w.root.string(),
                                     "COMMIT_ORDER_POWER_CUT_MATERIALISE_AT_EXIT=1"};
  const std::vector<std::string> args{dd,           "if=/dev/zero", "of=" + (w.root / "f").string(),
                                      "bs=4096",    "count=1",      "conv=fsync",
                                      "status=none"};
  CHECK(spawn(args, env) == 0);
  CHECK_FALSE(fs::exists(w.root / "f"));

  // An existing (durable) name: the synced bytes survive, unless the cut comes first.
  put(w.root / "f", "", false);
  CHECK(spawn(args, env) == 0);
  CHECK(read(w.root / "f") == std::string(4096, '\0'));

  put(w.root / "f", "", false);
  auto cut_first = env;
  cut_first.push_back("COMMIT_ORDER_POWER_CUT_AT=1");
  CHECK(spawn(args, cut_first) == 0);
  CHECK(read(w.root / "f") == "");
}
