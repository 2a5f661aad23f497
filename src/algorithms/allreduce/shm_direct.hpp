// The arena reduction shared by all-reduce and reduce (allreduce/shm_direct.cpp).
#pragma once

#include "algorithms/algorithm.hpp"

namespace chorus::algorithms {

/// Reduces every rank's `args.send` through the host arena; ranks with `keeps_result` write
/// the result to `args.recv` (all of them for all-reduce, the root for reduce), the others
/// only contribute and never touch `args.recv`.
void reduce_through_arena(const Call& args, const Context& ctx, bool keeps_result);

}  // namespace chorus::algorithms
