// SPDX-License-Identifier: BSL-1.0
// The parts every compile-fail case is built from: the tests' shared fixtures
// (tests/support/orders.hpp — order events, tables of each capability set, logs and position
// stores of each durability), under the name the cases use. A case and its twin differ in one
// part only, so the rule under test -- not a typo elsewhere -- is what fails.
//
// A case includes <commit_order/commit_order.hpp> itself, before this header, as a user's file
// would: the include chain is part of the diagnostic the case measures.
#pragma once

#include "../../support/orders.hpp"

namespace cf = test_support;
