// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/iterator.hpp — the part of <iterator> the core names (private).
//
// The source concepts and the loop name std::ranges::begin, end and size and the iterator
// concepts, nothing of the stream iterators <iterator> also declares, which bring
// <streambuf> and the locale machinery (without them the umbrella header compiled in 0.46 s of
// CPU instead of 0.51 with clang++ 14; docs/performance.md, Compile time). libstdc++ keeps the
// range access objects and the concepts in <bits/ranges_base.h>, which its <span> includes (as do
// its <string_view> and containers); the standard promises them only with <iterator> or <ranges>.
#pragma once

#include <version>  // names the standard library (__GLIBCXX__, _GLIBCXX_RELEASE) before the choice

// Only with the libstdc++ this was verified against (GCC 12, the project's compilers): what a
// header brings besides its own declarations may change in another release. Every other
// standard library, or COMMIT_ORDER_STANDARD_HEADERS_ONLY, takes <iterator>; both paths are
// compiled by tests/headers.
#if defined(__GLIBCXX__) && defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE == 12 && \
    !defined(COMMIT_ORDER_STANDARD_HEADERS_ONLY)
#include <span>  // libstdc++ 12's <span> defines them through <bits/ranges_base.h>
#else
#include <iterator>
#endif
