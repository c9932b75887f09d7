// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/chrono.hpp — the part of <chrono> the core names (private).
//
// The core names std::chrono::milliseconds (settings::auto_commit_interval) and
// std::chrono::steady_clock (AutoCommit's default clock), nothing of the calendar, time zones or
// formatting that C++20 added to <chrono>. libstdc++'s <chrono> brings those with <sstream>
// and the locale machinery: without them the umbrella header compiled in 0.46 s of CPU instead
// of 0.52 with g++ 12 (docs/performance.md, Compile time). Since GCC 11 it keeps durations,
// time points and the clocks in <bits/chrono.h>, which its own <thread> and <mutex> include
// for the same reason.
// That header is libstdc++'s. A program that uses more of std::chrono (its literals, the
// calendar) includes <chrono> itself, as it must anyway.
#pragma once

#include <version>  // names the standard library (__GLIBCXX__, _GLIBCXX_RELEASE) before the choice

// Only with the libstdc++ these headers were verified against (GCC 12, the project's compilers):
// a private header may need other headers first or move in another release. Every other
// standard library, or COMMIT_ORDER_STANDARD_HEADERS_ONLY, takes <chrono>; both paths are
// compiled by tests/headers.
#if defined(__GLIBCXX__) && defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE == 12 && \
    !defined(COMMIT_ORDER_STANDARD_HEADERS_ONLY)
#include <bits/chrono.h>
#else
#include <chrono>
#endif
