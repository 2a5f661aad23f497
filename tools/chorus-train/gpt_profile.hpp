// The compute profile of chorus-train's GPT (docs/planner.md, "Compute profiles"): what
// --write-compute-profile writes for chorus-plan (timed on every rank of the job at once) and
// what --partition time balances by when no profile is given.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/gpt.hpp>

#include "plan/compute_profile.hpp"

namespace chorus::train_tool {

/// Collective over `comm`: every rank times its own copy of the model at once (a barrier
/// before each timed item), so the times are those of comm.size() processes computing
/// together, as the ranks of a job on one host do (a one-rank `comm`: this process alone).
/// Timed: every block's forward and backward, the embedding's and the head's (with the loss)
/// at tp 1 without recomputation and micro-batch b = --batch / --micro-batches (the median of
/// a few repetitions after a warm-up one); the blocks' mean forward, backward, the
/// embedding's and the head's again at every power of two below b (the "at" lines); the
/// blocks' mean backward under selective and under full recomputation at each of those sizes
/// (the "recompute" lines); and the optimizer's step with clipping per parameter. Every rank
/// returns the same profile: each time the largest over the ranks (a step waits for its
/// slowest rank), its concurrency comm.size().
plan::ComputeProfile profile_gpt(const Options& options, const train::GptConfig& config,
                                 Communicator& comm);

/// profile_gpt at b alone on this process alone (no communicator), without the other sizes
/// and the optimizer (--partition time).
plan::ComputeProfile profile_gpt_blocks(const Options& options, const train::GptConfig& config);

}  // namespace chorus::train_tool
