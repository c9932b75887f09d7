// SPDX-License-Identifier: BSL-1.0
// support/lab/pg_server.hpp — a throwaway PostgreSQL server: initdb and pg_ctl in a fresh
// directory under /tmp, listening only on a unix socket there.
//
// initdb refuses to run as root, and the tests run as root in CI: as root, the server's
// directory is handed to `nobody` and initdb, pg_ctl and the server run as nobody (the
// forked child drops to it before exec). No TCP port is opened (listen_addresses=''), so
// parallel servers never collide; the socket lives in the server's own directory under /tmp
// (a unix socket path must stay under 107 bytes, which a build tree may not).
//
// The binaries: $COMMIT_ORDER_PG_BINDIR, else the newest /usr/lib/postgresql/*/bin (Debian's
// layout; tools/install-deps installs postgresql-15). There is no fallback and no skip: a
// machine that cannot start PostgreSQL makes whoever needed it fail, naming what is missing.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace crash_lab {

struct pg_server_options final {
  /// fsync=off: a commit reaches the operating system, not the disk. Enough for anything but
  /// a power cut (a crashed server, a killed client); much faster.
  bool fsync = false;
  /// More server settings ("-c name=value ..."), e.g. to load an extension.
  std::string extra_settings{};
};

class pg_server final {
 public:
  /// Where initdb and pg_ctl are; throws naming what is missing.
  static std::filesystem::path find_bindir() {
    if (const char* env = std::getenv("COMMIT_ORDER_PG_BINDIR"); env != nullptr && *env != '\0')
      return check_bindir(env);
    std::vector<std::filesystem::path> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      if (std::filesystem::exists(entry.path() / "bin" / "initdb"))
        found.push_back(entry.path() / "bin");
    }
    if (found.empty())
      throw std::runtime_error(
          "no PostgreSQL server binaries (initdb) under /usr/lib/postgresql/*/bin and "
          "COMMIT_ORDER_PG_BINDIR is not set -- install postgresql-15 (tools/install-deps)");
    // The newest major version: numeric order ("15" after "9").
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      return std::stoi(a.parent_path().filename().string()) <
             std::stoi(b.parent_path().filename().string());
    });
    return found.back();
  }

  /// initdb and start; throws (with the server's log) when either fails.
  explicit pg_server(pg_server_options options = {})
      : fsync_(options.fsync), extra_(std::move(options.extra_settings)) {
    bindir_ = find_bindir();
    std::string pattern = "/tmp/copg.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::system_category(), "mkdtemp /tmp/copg.XXXXXX");
    dir_ = pattern;
    try {
      if (::geteuid() == 0) {
        const owner o = nobody();
        if (::chown(dir_.c_str(), o.uid, o.gid) != 0)
          throw std::system_error(errno, std::system_category(), "chown " + dir_.string());
      }
      run({(bindir_ / "initdb").string(), "-D", (dir_ / "data").string(), "-A", "trust", "-U", "co",
           "--no-sync", "-E", "UTF8", "--locale=C"},
          dir_ / "initdb.log", "initdb");
      start();
    } catch (...) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
      throw;
    }
  }

  /// A server another process started in `dir` (the CTest fixture's stop step).
  static pg_server adopt(std::filesystem::path dir) { return pg_server(std::move(dir)); }

  pg_server(pg_server&& other) noexcept
      : bindir_(std::move(other.bindir_))
      , dir_(std::exchange(other.dir_, {}))
      , fsync_(other.fsync_)
      , extra_(std::move(other.extra_))
      , released_(other.released_) {}
  pg_server& operator=(pg_server&&) = delete;
  pg_server(const pg_server&) = delete;
  pg_server& operator=(const pg_server&) = delete;

  /// Stops the server and removes its directory, unless released.
  ~pg_server() {
    if (!released_)
      stop_and_remove();
  }

  /// The libpq connection string.
  [[nodiscard]] std::string conninfo() const {
    return "host=" + dir_.string() + " user=co dbname=postgres";
  }
  [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }
  [[nodiscard]] bool fsync() const noexcept { return fsync_; }

  /// The server dies: `pg_ctl stop -m immediate` ends every server process at once, with no
  /// checkpoint and no clean shutdown; the next start recovers from the WAL.
  void crash() {
    run({(bindir_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-m", "immediate", "-w",
         "stop"},
        dir_ / "pg_ctl.log", "pg_ctl stop -m immediate");
  }

  /// Starts the server again on the same data (after crash()).
  void restart() { start(); }

  /// A streaming standby of this server: a base backup (pg_basebackup -R, which points it at
  /// this server), started in a directory and on a socket of its own, with this server's fsync
  /// setting. It streams from this server once started; whether this server waits for it is
  /// this server's synchronous_standby_names.
  [[nodiscard]] pg_server make_standby() const {
    std::string pattern = "/tmp/copg.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::system_error(errno, std::system_category(), "mkdtemp /tmp/copg.XXXXXX");
    pg_server standby{std::filesystem::path(pattern), bindir_, fsync_};
    if (::geteuid() == 0) {
      const owner o = nobody();
      if (::chown(pattern.c_str(), o.uid, o.gid) != 0)
        throw std::system_error(errno, std::system_category(), "chown " + pattern);
    }
    standby.run({(bindir_ / "pg_basebackup").string(), "-h", dir_.string(), "-U", "co", "-D",
                 (standby.dir_ / "data").string(), "-R", "-X", "stream", "--no-sync"},
                standby.dir_ / "basebackup.log", "pg_basebackup");
    standby.start();
    return standby;
  }

  /// Keeps the server running after this object is gone (the fixture's start step).
  void release() noexcept { released_ = true; }

  /// Stops the server (immediately: its data is thrown away next) and removes its directory.
  void stop_and_remove() noexcept {
    if (dir_.empty())
      return;
    try {
      if (std::filesystem::exists(dir_ / "data" / "postmaster.pid"))
        crash();
    } catch (...) {
      // Removing the directory below still takes its socket away.
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }

  /// The tail of the server's log (for a failure message).
  [[nodiscard]] std::string log_tail() const { return tail(dir_ / "server.log"); }

 private:
  struct owner {
    uid_t uid;
    gid_t gid;
  };

  // An empty server directory `dir`, for a standby to be made in.
  pg_server(std::filesystem::path dir, std::filesystem::path bindir, bool fsync)
      : bindir_(std::move(bindir)), dir_(std::move(dir)), fsync_(fsync) {}

  explicit pg_server(std::filesystem::path dir) : dir_(std::move(dir)) {
    bindir_ = find_bindir();
    std::ifstream f(dir_ / "fsync");
    std::string v;
    f >> v;
    fsync_ = v == "on";
  }

  static std::filesystem::path check_bindir(const std::filesystem::path& p) {
    if (!std::filesystem::exists(p / "initdb"))
      throw std::runtime_error("COMMIT_ORDER_PG_BINDIR=" + p.string() + " holds no initdb");
    return p;
  }

  static owner nobody() {
    const ::passwd* pw = ::getpwnam("nobody");
    if (pw == nullptr)
      throw std::runtime_error(
          "running as root, the PostgreSQL server must run as another user, and there is no "
          "user 'nobody'");
    return owner{pw->pw_uid, pw->pw_gid};
  }

  void start() {
    {
      std::ofstream f(dir_ / "fsync");
      f << (fsync_ ? "on" : "off") << "\n";
    }
    const std::string settings = "-c listen_addresses='' -c unix_socket_directories='" +
                                 dir_.string() + "' -c fsync=" + (fsync_ ? "on" : "off") +
                                 " -c max_connections=80 -c shared_buffers=32MB " + extra_;
    run({(bindir_ / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-l",
         (dir_ / "server.log").string(), "-w", "-t", "60", "-o", settings, "start"},
        dir_ / "pg_ctl.log", "pg_ctl start");
  }

  // Runs a command (as nobody when we are root) with its output in `log`; throws with the
  // log's tail when it fails.
  void run(const std::vector<std::string>& command, const std::filesystem::path& log,
           const std::string& what) const {
    std::vector<std::string> storage = command;
    std::vector<char*> argv;
    for (auto& s : storage)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    const bool drop = ::geteuid() == 0;
    const owner o = drop ? nobody() : owner{::getuid(), ::getgid()};
    const std::string log_path = log.string();
    // Everything the child needs is ready before fork(): after it, only async-signal-safe
    // calls until exec.
    const ::pid_t pid = ::fork();
    if (pid < 0)
      throw std::system_error(errno, std::system_category(), "fork");
    if (pid == 0) {
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (in < 0 || out < 0)
        ::_exit(126);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(out, 2);
      // The server outlives this command: it must hold none of our descriptors (a pipe a
      // supervisor waits on would never reach end of file).
      ::syscall(SYS_close_range, 3U, ~0U, 0U);
      if (drop) {
        if (::setgroups(0, nullptr) != 0 || ::setgid(o.gid) != 0 || ::setuid(o.uid) != 0)
          ::_exit(125);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR)
        throw std::system_error(errno, std::system_category(), "waitpid");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error(what + " failed (status " + std::to_string(status) + "):\n" +
                               tail(log) + tail(dir_ / "server.log"));
    }
  }

  static std::string tail(const std::filesystem::path& p) {
    std::ifstream f(p);
    if (!f)
      return {};
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    if (s.size() > 4000)
      s.erase(0, s.size() - 4000);
    return s;
  }

  std::filesystem::path bindir_;
  std::filesystem::path dir_;
  bool fsync_ = false;
  std::string extra_;
  bool released_ = false;
};

}  // namespace crash_lab
