// SPDX-License-Identifier: BSL-1.0
// commit_order/detail/pipeline_impl.hpp — the loop behind `pipeline` (private).
//
// The loop is split by job, in detail/loop/: traits.hpp (what a configuration switches on),
// surface.hpp (construction, recovery, one poll, progress: the class), partitions.hpp
// (positions, claims, gaps, assignment changes), unit.hpp (a unit's steps and the failure
// protocol), writes.hpp (the write loop) and rejected.hpp (the stand-in for an illegal
// pipeline). docs/architecture.md walks a record through them.
#pragma once

#include "commit_order/detail/loop/partitions.hpp"
#include "commit_order/detail/loop/rejected.hpp"
#include "commit_order/detail/loop/surface.hpp"
#include "commit_order/detail/loop/traits.hpp"
#include "commit_order/detail/loop/unit.hpp"
#include "commit_order/detail/loop/writes.hpp"
