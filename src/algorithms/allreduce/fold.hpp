// Folding the extra ranks of a non-power-of-two rank count into the power-of-two
// core (patterns::recursive_doubling), shared by the all-reduces built on that
// core (recursive doubling, Rabenseifner): before the core runs, extra rank
// p + i hands its input to core rank i, which reduces it into its own; after,
// core rank i sends the result back.
#pragma once

#include "algorithms/common.hpp"
#include "algorithms/patterns/recursive_doubling.hpp"

namespace chorus::algorithms {

/// Writes send, with the partner's input folded in, to `work` as `work_type` (args.dtype, or
/// algorithms/partials.hpp's partial type: the extra's input travels in args.dtype, the sum
/// is not rounded). For an extra rank, does its whole part of the call (send its input,
/// receive the result into recv) and returns true: nothing left to do.
bool fold_in_extra_rank(RequestSet& requests, const Call& args,
                        const patterns::RecursiveDoubling& plan, void* work, DataType work_type);

/// Sends the result in recv back to the folded extra rank, if there is one.
void fold_out_extra_rank(RequestSet& requests, const Call& args,
                         const patterns::RecursiveDoubling& plan);

}  // namespace chorus::algorithms
