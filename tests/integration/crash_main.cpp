// SPDX-License-Identifier: BSL-1.0
// The crash tests' main: the same executable is the test runner and, with --child, the
// consumer process the tests start and SIGKILL.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/lab/child.hpp"

int main(int argc, char** argv) {
  if (crash_lab::is_child_invocation(argc, argv))
    return crash_lab::child_main(argc, argv);
  doctest::Context context(argc, argv);
  return context.run();
}
