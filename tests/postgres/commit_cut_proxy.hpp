// SPDX-License-Identifier: BSL-1.0
// A proxy in front of the tests' PostgreSQL server that loses the answer to a COMMIT on
// purpose. Once armed, it cuts the next connection that sends COMMIT as the sinks send it (a
// Parse message of the extended protocol whose query is "COMMIT"), at one of two points:
//   before_server  the COMMIT is not passed on: the server never runs it, and rolls the
//                  transaction back when the connection closes;
//   after_server   the COMMIT is passed on and the server's answer read through its
//                  ReadyForQuery -- the transaction has committed -- but not passed back.
// Either way both ends of that connection are closed: the client sent COMMIT and gets no
// answer, only a closed connection. Everything else is forwarded as it comes, so the client
// reconnects through the proxy as it would to the server. It listens on a unix socket in a
// directory of its own under /tmp.
#pragma once

#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace pg_test {

class commit_cut_proxy final {
 public:
  enum class cut : int { before_server = 1, after_server = 2 };

  /// A proxy for the server `server_conninfo` connects to over its unix socket.
  explicit commit_cut_proxy(const std::string& server_conninfo) {
    read_conninfo(server_conninfo);
    char dir[] = "/tmp/copx.XXXXXX";
    if (::mkdtemp(dir) == nullptr)
      throw std::runtime_error("commit_cut_proxy: cannot create a directory under /tmp");
    dir_ = dir;
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un address = address_of(dir_ + "/.s.PGSQL." + port_);
    if (listener_ < 0 ||
        ::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener_, 16) != 0)
      throw std::runtime_error("commit_cut_proxy: cannot listen in " + dir_);
    if (::pipe2(wake_, O_CLOEXEC) != 0)
      throw std::runtime_error("commit_cut_proxy: pipe");
    thread_ = std::thread([this] { loop(); });
  }

  commit_cut_proxy(const commit_cut_proxy&) = delete;
  commit_cut_proxy& operator=(const commit_cut_proxy&) = delete;

  ~commit_cut_proxy() {
    stop_ = true;
    (void)!::write(wake_[1], "x", 1);
    thread_.join();
    for (link& l : links_)
      close_link(l);
    ::close(listener_);
    ::close(wake_[0]);
    ::close(wake_[1]);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  /// The connection string of the server, through the proxy.
  [[nodiscard]] std::string conninfo() const {
    std::string out = "host=" + quoted(dir_) + " port=" + quoted(port_);
    for (const auto& [key, value] : options_)
      out += " " + key + "=" + quoted(value);
    return out;
  }

  /// The next COMMIT a client sends is cut, at `where`.
  void arm(cut where) { armed_ = static_cast<int>(where); }
  /// Connections cut so far.
  [[nodiscard]] int cuts() const { return cuts_; }

 private:
  struct link {
    int client = -1;
    int server = -1;
    std::string from_client;  ///< bytes of the client not parsed into whole messages yet
    bool started = false;     ///< past the startup packet: typed messages follow
    bool holding = false;     ///< COMMIT passed on (after_server): the answer is kept back
    std::string answer;       ///< the server's answer kept back
    bool closed = false;
  };

  static sockaddr_un address_of(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path)
      throw std::runtime_error("commit_cut_proxy: socket path too long: " + path);
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    return a;
  }

  static std::string quoted(const std::string& value) {
    std::string out = "'";
    for (const char c : value) {
      if (c == '\'' || c == '\\')
        out.push_back('\\');
      out.push_back(c);
    }
    return out + "'";
  }

  // The server's socket directory and port, and every other option kept for the proxy's
  // connection string.
  void read_conninfo(const std::string& conninfo) {
    char* error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &error);
    if (parsed == nullptr) {
      const std::string why = error != nullptr ? error : "out of memory";
      PQfreemem(error);
      throw std::runtime_error("commit_cut_proxy: " + why);
    }
    for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
      if (o->val == nullptr)
        continue;
      const std::string key = o->keyword;
      if (key == "host")
        server_dir_ = o->val;
      else if (key == "port")
        port_ = o->val;
      else
        options_.emplace_back(key, o->val);
    }
    PQconninfoFree(parsed);
    if (port_.empty())
      port_ = std::getenv("PGPORT") != nullptr ? std::getenv("PGPORT") : "5432";
    if (server_dir_.empty() || server_dir_.front() != '/')
      throw std::runtime_error("commit_cut_proxy: the server must listen on a unix socket (" +
                               conninfo + ")");
  }

  void loop() {
    std::vector<pollfd> fds;
    while (!stop_) {
      fds.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listener_, POLLIN, 0});
      for (const link& l : links_) {
        fds.push_back({l.client, POLLIN, 0});
        fds.push_back({l.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), -1) < 0)
        continue;  // EINTR
      if (fds[1].revents != 0)
        accept_one();
      std::size_t i = 2;
      for (link& l : links_) {
        if (i + 1 >= fds.size())
          break;  // accepted just now: not polled yet
        const short from_client = fds[i].revents;
        const short from_server = fds[i + 1].revents;
        i += 2;
        if (from_client != 0 && !l.closed)
          client_readable(l);
        if (from_server != 0 && !l.closed)
          server_readable(l);
      }
      links_.remove_if([](const link& l) { return l.closed; });
    }
  }

  void accept_one() {
    const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
      return;
    const int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un address = address_of(server_dir_ + "/.s.PGSQL." + port_);
    if (server < 0 ||
        ::connect(server, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
      ::close(client);
      if (server >= 0)
        ::close(server);
      return;
    }
    link l;
    l.client = client;
    l.server = server;
    links_.push_back(std::move(l));
  }

  static std::uint32_t be32(const std::string& b, std::size_t at) {
    return (std::uint32_t(std::uint8_t(b[at])) << 24) |
           (std::uint32_t(std::uint8_t(b[at + 1])) << 16) |
           (std::uint32_t(std::uint8_t(b[at + 2])) << 8) | std::uint32_t(std::uint8_t(b[at + 3]));
  }

  static bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  static bool receive(int fd, std::string& into) {
    char chunk[65536];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0)
      return false;
    into.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  void close_link(link& l) {
    if (l.closed)
      return;
    ::close(l.client);
    ::close(l.server);
    l.closed = true;
  }

  // Passes whole messages on, watching for the COMMIT to cut.
  void client_readable(link& l) {
    if (!receive(l.client, l.from_client)) {
      close_link(l);
      return;
    }
    if (l.holding) {  // nothing more is parsed once the COMMIT is passed on
      if (!send_all(l.server, l.from_client))
        close_link(l);
      l.from_client.clear();
      return;
    }
    std::size_t at = 0;  // the start of the first message not passed on yet
    for (;;) {
      const std::string& b = l.from_client;
      std::size_t size = 0;
      if (!l.started) {  // the startup packet (or an SSL/GSS/cancel request): no type byte
        if (b.size() - at < 8 || b.size() - at < be32(b, at))
          break;
        size = be32(b, at);
        l.started = be32(b, at + 4) == (3u << 16);  // protocol 3.0: the StartupMessage
      } else {
        if (b.size() - at < 5 || b.size() - at < be32(b, at + 1) + 1)
          break;
        size = be32(b, at + 1) + 1;
        if (b[at] == 'P' && armed_ != 0 && parses_commit(b.substr(at, size))) {
          const cut where = static_cast<cut>(armed_.exchange(0));
          if (!send_all(l.server, std::string_view(b).substr(0, at))) {
            close_link(l);
            return;
          }
          if (where == cut::before_server) {
            ++cuts_;
            close_link(l);
            return;
          }
          // after_server: the COMMIT and what follows it (the Sync) go on; the answer stays.
          l.holding = true;
          if (!send_all(l.server, std::string_view(b).substr(at)))
            close_link(l);
          l.from_client.clear();
          return;
        }
      }
      at += size;
    }
    if (!send_all(l.server, std::string_view(l.from_client).substr(0, at)))
      close_link(l);
    l.from_client.erase(0, at);
  }

  // Passes the server's bytes back, except the answer to a COMMIT cut after_server: that is
  // read through its ReadyForQuery, then the link is closed.
  void server_readable(link& l) {
    std::string bytes;
    if (!receive(l.server, bytes)) {
      close_link(l);
      return;
    }
    if (!l.holding) {
      if (!send_all(l.client, bytes))
        close_link(l);
      return;
    }
    l.answer += bytes;
    for (std::size_t at = 0; l.answer.size() - at >= 5;) {
      const std::size_t size = be32(l.answer, at + 1) + 1;
      if (l.answer.size() - at < size)
        break;
      if (l.answer[at] == 'Z') {  // ReadyForQuery: the COMMIT has been answered
        ++cuts_;
        close_link(l);
        return;
      }
      at += size;
    }
  }

  // A Parse message ('P', length, statement name, query, ...) whose query is COMMIT.
  static bool parses_commit(std::string_view m) {
    const std::size_t name_end = m.find('\0', 5);
    if (name_end == std::string_view::npos)
      return false;
    const std::size_t query_end = m.find('\0', name_end + 1);
    return query_end != std::string_view::npos &&
           m.substr(name_end + 1, query_end - name_end - 1) == "COMMIT";
  }

  std::string server_dir_;
  std::string port_;
  std::vector<std::pair<std::string, std::string>> options_;
  std::string dir_;
  int listener_ = -1;
  int wake_[2]{-1, -1};
  std::list<link> links_;
  std::atomic<int> armed_{0};
  std::atomic<int> cuts_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pg_test
