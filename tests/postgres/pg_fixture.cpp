// SPDX-License-Identifier: BSL-1.0
// The CTest fixture of the PostgreSQL tests: starts a throwaway server and leaves it running
// for the tests, or stops one and removes its directory.
//
//   commit_order_pg_fixture start <info file> on|off   initdb + pg_ctl start (fsync on or off);
//                                                     writes the connection string to <info
//                                                     file> and the server's directory to
//                                                     <info file>.dir
//   commit_order_pg_fixture stop <info file>           pg_ctl stop; removes the directory
//
// A server left behind by an interrupted run (its directory recorded in <info file>.dir) is
// stopped before a new one starts. Exit code 0 on success; 1, with the reason on stderr,
// otherwise -- there is no skip.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include "support/lab/pg_server.hpp"

namespace {

void stop(const std::filesystem::path& info) {
  const std::filesystem::path dir_file = info.string() + ".dir";
  std::ifstream f(dir_file);
  std::string dir;
  if (f >> dir && !dir.empty() && std::filesystem::exists(dir))
    crash_lab::pg_server::adopt(dir).stop_and_remove();
  std::filesystem::remove(info);
  std::filesystem::remove(dir_file);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string_view command = argc > 1 ? argv[1] : "";
    if (command == "start" && argc == 4) {
      const std::filesystem::path info = argv[2];
      stop(info);
      crash_lab::pg_server server(crash_lab::pg_server_options{std::string_view(argv[3]) == "on"});
      {
        std::ofstream(info.string() + ".dir") << server.dir().string() << "\n";
        std::ofstream(info) << server.conninfo() << "\n";
      }
      server.release();
      std::cout << "postgres fixture: " << server.conninfo() << " (fsync " << argv[3] << ")\n";
      return 0;
    }
    if (command == "stop" && argc == 3) {
      stop(argv[2]);
      return 0;
    }
    std::cerr << "usage: commit_order_pg_fixture start <info file> on|off | stop <info file>\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "postgres fixture: " << e.what() << "\n";
    return 1;
  }
}
