// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/chrono.hpp — the part of <chrono> the core names (private).
//
// The core names std::chrono::milliseconds (settings::auto_commit_interval) and
// std::chrono::steady_clock (AutoCommit's default clock), nothing of the calendar, time zones or
// formatting that C++20 added to <chrono>. libstdc++'s <chrono> brings those with <sstream>
// and the locale machinery, about a third of what the umbrella header costs to compile
// (docs/performance.md, Compile time); since GCC 11 it keeps durations, time points and the
// clocks in <bits/chrono.h>, which its own <thread> and <mutex> include for the same reason.
// That header is libstdc++'s, so it is used only where it exists; everywhere else, <chrono>.
// A program that uses more of std::chrono (its literals, system_clock's calendar) includes
// <chrono> itself, as it would have to anyway.
#pragma once

#include <version>  // names the standard library (__GLIBCXX__) before the choice below

#if defined(__GLIBCXX__) && defined(__has_include)
#if __has_include(<bits/chrono.h>)
#include <bits/chrono.h>
#else
#include <chrono>
#endif
#else
#include <chrono>
#endif
