// SPDX-License-Identifier: BSL-1.0
// The CTest fixture of the kafka_broker tests: starts a throwaway single-node Kafka broker
// (KRaft, broker and controller in one JVM) and leaves it running for the tests, or stops one
// and removes its directory.
//
//   commit_order_kafka_broker_fixture start <info file> <jar dir>
//       formats a storage directory under a fresh /tmp/cokafka.XXXXXX with a random cluster
//       id, starts the broker from the jars of <jar dir> (tools/kafka-broker/fetch put them
//       there) listening on 127.0.0.1 only, on two free ports (PLAINTEXT for clients,
//       CONTROLLER for its quorum of itself), waits until it answers a metadata request, and
//       writes "127.0.0.1:<port>" to <info file> and the directory to <info file>.dir
//   commit_order_kafka_broker_fixture stop <info file>
//       kills the JVM whose PID the directory records (after checking it is that broker),
//       keeps its log as <info file>.log, removes the directory and the info files
//   commit_order_kafka_broker_fixture crash <info file>
//       SIGKILLs that broker and keeps its directory (a test's crash)
//   commit_order_kafka_broker_fixture restart <info file> <jar dir>
//       starts it again from its directory, on the same ports, and waits until it answers
//
// A broker left behind by an interrupted run (its directory recorded in <info file>.dir) is
// stopped before a new one starts. Exit code 0 on success; 1, with the reason on stderr,
// otherwise -- there is no skip: a broker that does not start fails every test that needs it.
// Nothing is downloaded here: jars missing from <jar dir> are an error naming install-deps.
//
// Measured on the 2-core machines (Kafka 4.4.0, OpenJDK 17): format ~0.8 s, then ~1.7 s from
// the JVM's start to the first metadata answer; the JVM's RSS is ~180 MB after start and
// ~250 MB after the tier. Java flags: -Xmx256m (128m runs too once the log cleaner's 128 MiB
// dedupe buffer is shrunk; 256m leaves room), SerialGC (2 cores, a tiny heap), and C1 only
// (-XX:TieredStopAtLevel=1: 0.5 s faster to start and ~25 MB smaller; the broker's throughput
// does not matter here).
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

/// The JVM's options: see the measurements above.
const std::vector<std::string> jvm_options = {"-Xmx256m", "-Xms64m", "-XX:+UseSerialGC",
                                              "-XX:TieredStopAtLevel=1",
                                              "-Djava.awt.headless=true"};

/// How long a start may take before it fails (a cold JVM on a loaded 2-core machine included).
constexpr auto start_deadline = 90s;

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
  if (!f.flush())
    throw std::runtime_error("cannot write " + p.string());
}

/// The last `n` lines of the broker's log, for an error message.
std::string log_tail(const fs::path& log, std::size_t n = 25) {
  std::istringstream in(read_file(log));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += "  | " + lines[i] + "\n";
  return out;
}

/// A random Kafka cluster id: 16 random bytes in URL-safe base64 without padding (what
/// `kafka-storage random-uuid` prints), never starting with '-' (read as an option).
std::string random_cluster_id() {
  static constexpr std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::random_device rd;
  for (;;) {
    std::array<unsigned char, 16> b{};
    for (auto& c : b)
      c = static_cast<unsigned char>(rd());
    std::string out;
    unsigned bits = 0;
    int held = 0;
    for (unsigned char c : b) {
      bits = (bits << 8) | c;
      held += 8;
      while (held >= 6) {
        held -= 6;
        out += alphabet[(bits >> held) & 63];
      }
    }
    if (held > 0)
      out += alphabet[(bits << (6 - held)) & 63];
    if (out.front() != '-')
      return out;  // 22 characters
  }
}

/// Two distinct free TCP ports on 127.0.0.1, found by binding port 0. The broker binds them a
/// moment later; a port taken in between makes that attempt fail, and start tries again.
std::array<int, 2> free_ports() {
  std::array<int, 2> fds{-1, -1};
  std::array<int, 2> ports{};
  for (std::size_t i = 0; i < 2; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error(std::string("cannot find a free port: ") + std::strerror(errno));
    ports[i] = ntohs(a.sin_port);
  }
  for (int fd : fds)
    ::close(fd);
  return ports;
}

std::string java_binary() {
  if (const char* home = std::getenv("JAVA_HOME"); home != nullptr && *home != '\0')
    return (fs::path(home) / "bin" / "java").string();
  return "java";
}

/// The java command line for `main_class` with `args`, from the jars of `jars`.
std::vector<std::string> java_command(const fs::path& jars, const fs::path& dir,
                                      const std::string& main_class,
                                      const std::vector<std::string>& args) {
  std::vector<std::string> cmd{java_binary()};
  cmd.insert(cmd.end(), jvm_options.begin(), jvm_options.end());
  cmd.push_back("-Dlog4j2.configurationFile=" + (dir / "log4j2.properties").string());
  cmd.push_back("-cp");
  cmd.push_back((jars / "*").string());
  cmd.push_back(main_class);
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

/// Starts `cmd` in its own session (so it outlives this process and ctest's handling of it),
/// stdin from /dev/null, stdout and stderr to `log`, working directory `dir`.
pid_t spawn(const std::vector<std::string>& cmd, const fs::path& dir, const fs::path& log) {
  std::vector<char*> argv;
  for (const auto& a : cmd)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls from here on.
    ::setsid();
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || ::chdir(dir.c_str()) != 0)
      ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    // Nothing else of ours: ctest waits for the pipes it gave this process to close.
    for (int fd = 3; fd < 1024; ++fd)
      ::close(fd);
    ::execvp(argv[0], argv.data());
    static constexpr char msg[] = "broker fixture: cannot execute java\n";
    (void)!::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  return pid;
}

/// Waits for a child; its exit status.
int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string server_properties(const fs::path& data, int client_port, int controller_port) {
  const std::string client = "127.0.0.1:" + std::to_string(client_port);
  const std::string controller = "127.0.0.1:" + std::to_string(controller_port);
  return "# written by commit_order_kafka_broker_fixture\n"
         "process.roles=broker,controller\n"
         "node.id=1\n"
         "controller.quorum.voters=1@" +
         controller +
         "\n"
         "listeners=PLAINTEXT://" +
         client + ",CONTROLLER://" + controller +
         "\n"
         "advertised.listeners=PLAINTEXT://" +
         client +
         "\n"
         "controller.listener.names=CONTROLLER\n"
         "inter.broker.listener.name=PLAINTEXT\n"
         "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
         "log.dirs=" +
         data.string() +
         "\n"
         // One broker: every internal topic has one replica.
         "offsets.topic.replication.factor=1\n"
         "offsets.topic.num.partitions=4\n"
         "transaction.state.log.replication.factor=1\n"
         "transaction.state.log.min.isr=1\n"
         "transaction.state.log.num.partitions=4\n"
         "share.coordinator.state.topic.replication.factor=1\n"
         "share.coordinator.state.topic.min.isr=1\n"
         // Tests: a group forms at once, sessions as short as a test wants, topics only when
         // asked for, deletable, and segments small enough for retention to act on.
         "group.initial.rebalance.delay.ms=0\n"
         "group.min.session.timeout.ms=1000\n"
         "num.partitions=1\n"
         "auto.create.topics.enable=false\n"
         "delete.topic.enable=true\n"
         "log.segment.bytes=1048576\n"
         "log.retention.check.interval.ms=1000\n"
         // Retention's first check would otherwise wait 30 s after the start.
         "log.initial.task.delay.ms=0\n"
         // The log cleaner looks for work every 15 s by default: a compacted topic's test would
         // wait that long for it.
         "log.cleaner.backoff.ms=100\n"
         // The log cleaner allocates a 128 MiB dedupe buffer by default: more than the heap.
         "log.cleaner.dedupe.buffer.size=4194304\n"
         "num.network.threads=2\n"
         "num.io.threads=2\n"
         "num.recovery.threads.per.data.dir=1\n"
         "background.threads=2\n";
}

constexpr std::string_view log4j2_properties =
    "rootLogger.level=INFO\n"
    "rootLogger.appenderRef.stdout.ref=STDOUT\n"
    "appender.stdout.type=Console\n"
    "appender.stdout.name=STDOUT\n"
    "appender.stdout.layout.type=PatternLayout\n"
    "appender.stdout.layout.pattern=[%d] %p %m (%c)%n\n"
    // The configuration dumps are most of an INFO log and say nothing a failure needs.
    "logger.config.name=org.apache.kafka.common.config.AbstractConfig\n"
    "logger.config.level=WARN\n";

/// Whether the broker at `bootstrap` answers a metadata request within `timeout`.
bool answers_metadata(rd_kafka_t* rk, std::chrono::milliseconds timeout) {
  const struct rd_kafka_metadata* md = nullptr;
  const auto e = rd_kafka_metadata(rk, 0, nullptr, &md, static_cast<int>(timeout.count()));
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
    return false;
  const bool ok = md->broker_cnt == 1;
  rd_kafka_metadata_destroy(md);
  return ok;
}

std::optional<long> rss_kib(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return std::nullopt;
}

/// The command line of process `pid` (arguments separated by spaces), empty when it is gone.
std::string command_line(pid_t pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : s)
    if (c == '\0')
      c = ' ';
  return s;
}

bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0)
    return false;
  // A zombie (dead, not yet reaped by its new parent) is gone too.
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

/// Kills the broker of directory `dir`, if its PID file names a live broker of that directory
/// (never another process that reused the PID), and waits until it is gone.
void kill_broker(const fs::path& dir) {
  std::ifstream f(dir / "broker.pid");
  pid_t pid = 0;
  if (!(f >> pid) || pid <= 1)
    return;
  const std::string cmd = command_line(pid);
  if (cmd.find("kafka.Kafka") == std::string::npos ||
      cmd.find((dir / "server.properties").string()) == std::string::npos)
    return;  // gone, or the PID is another process's now
  // The broker's data is thrown away: no clean shutdown to wait for.
  ::kill(pid, SIGKILL);
  const auto deadline = steady::now() + 10s;
  while (alive(pid) && steady::now() < deadline)
    std::this_thread::sleep_for(20ms);
}

void stop(const fs::path& info) {
  const fs::path dir_file = info.string() + ".dir";
  std::ifstream f(dir_file);
  std::string dir;
  if (f >> dir && !dir.empty() && fs::exists(dir)) {
    kill_broker(dir);
    std::error_code ignored;
    fs::copy_file(fs::path(dir) / "broker.log", info.string() + ".log",
                  fs::copy_options::overwrite_existing, ignored);
    fs::remove_all(dir);
  }
  fs::remove(info);
  fs::remove(dir_file);
}

struct started final {
  std::string bootstrap;
  pid_t pid = 0;
  double format_s = 0, ready_s = 0;
};

bool launch(const fs::path& jars, const fs::path& dir, started& s);

/// One attempt on two fresh ports; none when the broker could not bind them (taken between
/// free_ports and the broker's bind); throws on any other failure.
std::optional<started> attempt(const fs::path& jars, const fs::path& dir) {
  const auto [client_port, controller_port] = free_ports();
  const fs::path data = dir / "data";
  const fs::path log = dir / "broker.log";
  fs::remove_all(data);
  write_file(dir / "server.properties", server_properties(data, client_port, controller_port));

  started s;
  s.bootstrap = "127.0.0.1:" + std::to_string(client_port);
  const auto t0 = steady::now();
  const pid_t format = spawn(java_command(jars, dir, "kafka.tools.StorageTool",
                                          {"format", "--cluster-id", random_cluster_id(),
                                           "--config", (dir / "server.properties").string()}),
                             dir, log);
  if (const int rc = wait_for(format); rc != 0)
    throw std::runtime_error("formatting the storage directory failed (exit " + std::to_string(rc) +
                             "):\n" + log_tail(log));
  s.format_s = std::chrono::duration<double>(steady::now() - t0).count();

  if (!launch(jars, dir, s))
    return std::nullopt;
  return s;
}

/// Starts the broker of `dir` (formatted, its server.properties written) and waits until it
/// answers at s.bootstrap; records its PID in s.pid and dir/broker.pid, its time to answer in
/// s.ready_s. False when it could not bind its ports; throws on any other failure.
bool launch(const fs::path& jars, const fs::path& dir, started& s) {
  const fs::path log = dir / "broker.log";
  const auto t1 = steady::now();
  s.pid = spawn(java_command(jars, dir, "kafka.Kafka", {(dir / "server.properties").string()}), dir,
                log);
  write_file(dir / "broker.pid", std::to_string(s.pid) + "\n");

  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::pair<const char*, const char*> settings[] = {
      {"bootstrap.servers", s.bootstrap.c_str()},
      {"log_level", "0"},  // refused connections until the broker listens are expected
      {"reconnect.backoff.ms", "20"},
      {"reconnect.backoff.max.ms", "100"}};
  for (const auto& [key, value] : settings)
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK)
      throw std::runtime_error(std::string("librdkafka: ") + err);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr)
    throw std::runtime_error(std::string("librdkafka: ") + err);
  struct destroy {
    rd_kafka_t* rk;
    ~destroy() { rd_kafka_destroy(rk); }
  } guard{rk};

  while (steady::now() - t1 < start_deadline) {
    int status = 0;
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) {
      const std::string text = read_file(log);
      if (text.find("Address already in use") != std::string::npos)
        return false;
      throw std::runtime_error("the broker exited while starting (status " +
                               std::to_string(status) + "):\n" + log_tail(log));
    }
    if (answers_metadata(rk, 500ms)) {
      s.ready_s = std::chrono::duration<double>(steady::now() - t1).count();
      return true;
    }
    std::this_thread::sleep_for(50ms);
  }
  kill_broker(dir);
  throw std::runtime_error("the broker did not answer a metadata request within " +
                           std::to_string(start_deadline.count()) + " s:\n" + log_tail(log));
}

int start(const fs::path& info, const fs::path& jars) {
  stop(info);
  bool found = false;
  for (const auto& entry : fs::directory_iterator(jars))  // throws when the folder is missing
    found = found || entry.path().filename().string().rfind("kafka_2.13-", 0) == 0;
  if (!found)
    throw std::runtime_error("no kafka_2.13 jar in " + jars.string());

  std::string pattern = "/tmp/cokafka.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a directory under /tmp");
  const fs::path dir = pattern;
  write_file(info.string() + ".dir", dir.string() + "\n");
  write_file(dir / "log4j2.properties", std::string(log4j2_properties));

  for (int i = 0; i < 3; ++i) {
    if (const auto s = attempt(jars, dir)) {
      write_file(info, s->bootstrap + "\n");
      const auto rss = rss_kib(s->pid);
      std::printf(
          "kafka broker fixture: %s (pid %d, %s): formatted in %.2f s, answered in %.2f s, "
          "RSS %ld MiB\n",
          s->bootstrap.c_str(), static_cast<int>(s->pid), dir.c_str(), s->format_s, s->ready_s,
          rss ? *rss / 1024 : -1L);
      return 0;
    }
    std::printf("kafka broker fixture: a port was taken before the broker bound it; again\n");
  }
  throw std::runtime_error("the broker found its ports taken three times");
}

/// The directory of the broker `info` names.
fs::path broker_dir(const fs::path& info) {
  std::ifstream f(info.string() + ".dir");
  std::string dir;
  if (!(f >> dir) || dir.empty() || !fs::exists(dir))
    throw std::runtime_error("no broker directory recorded in " + info.string() + ".dir");
  return dir;
}

/// SIGKILLs the broker `info` names, keeping its data: a crash, for a test to restart it from.
void crash(const fs::path& info) {
  const fs::path dir = broker_dir(info);
  kill_broker(dir);
  std::ifstream f(dir / "broker.pid");
  pid_t pid = 0;
  if (f >> pid && pid > 1 && alive(pid) &&
      command_line(pid).find("kafka.Kafka") != std::string::npos)
    throw std::runtime_error("the broker (pid " + std::to_string(pid) + ") is still running");
}

/// Starts the broker `info` names again, from its data, on its ports.
int restart(const fs::path& info, const fs::path& jars) {
  const fs::path dir = broker_dir(info);
  started s;
  std::ifstream f(info);
  if (!(f >> s.bootstrap))
    throw std::runtime_error("no broker address in " + info.string());
  // The ports were the broker's a moment ago; one may take a moment to be free again.
  for (int i = 0; i < 3; ++i) {
    if (launch(jars, dir, s)) {
      std::printf("kafka broker fixture: %s restarted (pid %d): answered in %.2f s\n",
                  s.bootstrap.c_str(), static_cast<int>(s.pid), s.ready_s);
      return 0;
    }
    std::this_thread::sleep_for(1s);
  }
  throw std::runtime_error("the restarted broker found its ports taken three times");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string_view command = argc > 1 ? argv[1] : "";
    if (command == "start" && argc == 4)
      return start(argv[2], argv[3]);
    if (command == "stop" && argc == 3) {
      stop(argv[2]);
      return 0;
    }
    if (command == "crash" && argc == 3) {
      crash(argv[2]);
      return 0;
    }
    if (command == "restart" && argc == 4)
      return restart(argv[2], argv[3]);
    std::cerr << "usage: commit_order_kafka_broker_fixture start <info file> <jar dir> | stop "
                 "<info file> | crash <info file> | restart <info file> <jar dir>\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kafka broker fixture: " << e.what()
              << "\n(the broker's jars come from tools/install-deps, which runs "
                 "tools/kafka-broker/fetch; the tests download nothing)\n";
    return 1;
  }
}
