// SPDX-License-Identifier: BSL-1.0
// The PostgreSQL process tests' main: the same executable is the test runner and the consumer
// processes the tests start and kill -- a crash_lab consumer (--child) or a consumer that
// pauses inside its first unit so another can take its partition over (--zombie-child).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/lab/child.hpp"
#include "zombie_child.hpp"

int main(int argc, char** argv) {
  if (crash_lab::is_child_invocation(argc, argv))
    return crash_lab::child_main(argc, argv);
  if (pg_test::is_zombie_invocation(argc, argv))
    return pg_test::zombie_main(argc, argv);
  doctest::Context context(argc, argv);
  return context.run();
}
