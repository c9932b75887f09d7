// SPDX-License-Identifier: BSL-1.0
// support/lab/process.hpp — a child process the supervisor can read from and SIGKILL.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace crash_lab {

/// How a child ended.
struct exit_status {
  bool killed = false;  ///< by our SIGKILL
  int code = 0;         ///< exit code, or the signal number for another signal
  bool signalled = false;
};

/// A running child whose stdout is a pipe to us. The destructor kills a child that is still
/// running: a failing test never leaves a consumer behind.
class child_process final {
 public:
  using clock = std::chrono::steady_clock;
  using line_handler = std::function<void(std::string_view)>;

  child_process(const std::filesystem::path& executable, const std::vector<std::string>& args) {
    // Everything the child needs is built before fork(): after it, only async-signal-safe
    // calls are allowed until exec.
    std::vector<std::string> storage;
    storage.push_back(executable.string());
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : storage)
      argv.push_back(s.data());
    argv.push_back(nullptr);

    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::system_category(), "pipe2");
    pid_ = ::fork();
    if (pid_ < 0) {
      const int err = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      throw std::system_error(err, std::system_category(), "fork");
    }
    if (pid_ == 0) {
      ::dup2(fds[1], 1);  // dup2 clears O_CLOEXEC on the copy
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }

  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  ~child_process() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      int raw = 0;
      ::waitpid(pid_, &raw, 0);
    }
    if (out_ >= 0)
      ::close(out_);
  }

  /// Reads the child's lines until `until` returns true for one, the child exits, or
  /// `deadline` passes. Returns true when `until` matched.
  bool read_until(clock::time_point deadline, const line_handler& each,
                  const std::function<bool(std::string_view)>& until = {}) {
    for (;;) {
      // Lines already buffered first.
      for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
        const std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        each(line);
        if (until && until(line))
          return true;
      }
      if (eof_)
        return false;
      const auto now = clock::now();
      if (now >= deadline)
        return false;
      const auto wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      ::pollfd p{out_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(wait));
      if (ready < 0 && errno != EINTR)
        throw std::system_error(errno, std::system_category(), "poll");
      if (ready > 0)
        fill();
    }
  }

  /// SIGKILLs the child (if it still runs), reads what it wrote before dying, and reaps it.
  exit_status kill(const line_handler& each) {
    if (!status_)
      ::kill(pid_, SIGKILL);
    return wait(each);
  }

  /// Reads everything until the child closes its stdout, then reaps it.
  exit_status wait(const line_handler& each) {
    while (!eof_)
      fill();
    read_until(clock::now(), each);
    if (!status_) {
      int raw = 0;
      while (::waitpid(pid_, &raw, 0) < 0) {
        if (errno != EINTR)
          throw std::system_error(errno, std::system_category(), "waitpid");
      }
      exit_status s;
      if (WIFSIGNALED(raw)) {
        s.signalled = true;
        s.code = WTERMSIG(raw);
        s.killed = s.code == SIGKILL;
      } else {
        s.code = WEXITSTATUS(raw);
      }
      status_ = s;
    }
    return *status_;
  }

  [[nodiscard]] bool output_closed() const noexcept { return eof_; }

 private:
  void fill() {
    char chunk[4096];
    const ::ssize_t n = ::read(out_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        return;
      throw std::system_error(errno, std::system_category(), "read");
    }
    if (n == 0)
      eof_ = true;
    else
      buffer_.append(chunk, static_cast<std::size_t>(n));
  }

  ::pid_t pid_ = -1;
  int out_ = -1;
  bool eof_ = false;
  std::string buffer_;
  std::optional<exit_status> status_;
};

}  // namespace crash_lab
