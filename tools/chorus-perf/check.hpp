// Data whose collective result has a closed form, and the count of elements
// that differ from it.
//
// Inputs are small integers, exact in every dtype (bfloat16 holds integers up
// to 256 exactly): sum/avg use (q + k) mod 4, max/min (5q + k) mod 11, prod 2
// where (q + k) mod 3 == 0 else 1 (a power of two, exact in floats; integer
// dtypes wrap exactly as the library's two's-complement arithmetic does);
// data-movement collectives use the tag (13q + k) mod 97, so every element
// says where it came from. Unwritten receive memory holds the sentinel 111.
// Sums stay exact up to 85 ranks in bfloat16 (3n <= 256).
#pragma once

#include <cstddef>

#include "collectives.hpp"

namespace chorus::perf {

/// Sentinel everywhere, then this rank's inputs in the send region.
void fill_buffers(const Case& c, Buffers& buffers);

/// Elements of this rank's output region that differ from the closed form
/// (0 where the rank has no output: reduce and gather off the root, barrier).
/// Integers must match exactly; floats within a few units in the last place
/// (avg may divide differently).
std::size_t count_wrong(const Case& c, const Buffers& buffers);

}  // namespace chorus::perf
