// Test helper: the binary that links allocation_probe.cpp replaces the global
// operator new and records the largest single allocation since the last reset.
#pragma once

#include <cstddef>

namespace chorus::testing {

void reset_largest_allocation();
std::size_t largest_allocation();

}  // namespace chorus::testing
