// SPDX-License-Identifier: BSL-1.0
// A consumer process for the zombie test:
//
//   <exe> --zombie-child <conninfo> <schema> <log dir> <mark> <go file or ->
//
// It consumes the crash lab's order log under TransactionalPosition into the schema's
// orders_flat (a fresh owner epoch: the last consumer started owns the partition), writing
// `mark` as every row's customer_id so the test can tell whose rows are whose. Given a go
// file, it stops inside its first unit -- rows applied, nothing sent -- says "paused", and
// waits until the file exists. It reports on stdout:
//   ready <position> <epoch>   recovered and claimed the partition at <epoch>
//   paused                     inside its first unit, before commit
//   fenced <mine> <current>    its commit was refused: another owner holds the partition
//   done <position>            consumed the log to its end
// Exit codes: 0 done, 5 fenced, 2 any other error.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include <commit_order/adapters/postgres.hpp>
#include <commit_order/commit_order.hpp>

#include "support/lab/orders.hpp"
#include "support/lab/pg_lab.hpp"

namespace pg_test {

inline constexpr std::string_view zombie_flag = "--zombie-child";

inline bool is_zombie_invocation(int argc, char** argv) {
  return argc > 1 && std::string_view(argv[1]) == zombie_flag;
}

inline void say(const std::string& line) {
  const std::string text = line + "\n";
  if (::write(1, text.data(), text.size()) < 0)
    std::_Exit(4);
}

/// The real sink, marking its rows and able to stop inside its first unit.
class pausing_sink final
    : public commit_order::postgres::guarded_upsert_sink<crash_lab::pg_orders_flat,
                                                         commit_order::postgres::buffered> {
  using base = commit_order::postgres::guarded_upsert_sink<crash_lab::pg_orders_flat,
                                                           commit_order::postgres::buffered>;

 public:
  pausing_sink(std::string conninfo, commit_order::postgres::sink_options o, std::int64_t mark,
               std::filesystem::path go)
      : base(std::move(conninfo), std::move(o)), mark_(mark), go_(std::move(go)) {}

  void apply(commit_order::offset o, const crash_lab::order_event& row) {
    crash_lab::order_event marked = row;
    marked.customer_id = mark_;
    base::apply(commit_order::partition_id{0}, o, marked);
    applied_ = true;
  }

  void commit() {
    if (applied_ && !go_.empty()) {
      say("paused");
      while (!std::filesystem::exists(go_))
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      go_.clear();
    }
    base::commit();
  }

 private:
  std::int64_t mark_;
  std::filesystem::path go_;
  bool applied_ = false;
};

inline int zombie_main(int argc, char** argv) {
  namespace co = commit_order;
  try {
    if (argc != 7)
      throw std::invalid_argument("expected 5 arguments after --zombie-child");
    commit_order::postgres::sink_options o;
    o.schema = argv[3];
    o.stream = "orders";
    const std::string_view go = argv[6];
    pausing_sink sink(argv[2], o, std::stoll(argv[5]),
                      go == "-" ? std::filesystem::path() : std::filesystem::path(go));
    // The zombie and its successor read copies of one log (a paused zombie keeps its lock):
    // one log, by its name.
    co::file::log_options options = crash_lab::lab_log_options();
    options.name = "orders";
    crash_lab::order_log log(argv[4], options);
    co::pipeline<crash_lab::order_log, pausing_sink, co::TransactionalPosition<>> p(
        log, sink, co::settings{.batch_size = 16});
    try {
      const co::position start = p.recover();
      say("ready " + std::to_string(start.value()) + " " +
          std::to_string(sink.claimed_epoch()->value()));
      while (p.poll_once() != 0) {
      }
    } catch (const co::fenced& e) {
      say("fenced " + std::to_string(e.mine().value()) + " " + std::to_string(e.current().value()));
      return 5;
    }
    say("done " + std::to_string(p.read_position().value()));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "zombie child: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace pg_test
