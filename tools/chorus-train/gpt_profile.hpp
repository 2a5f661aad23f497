// The compute profile of chorus-train's GPT (docs/planner.md, "Compute profiles"): what
// --write-compute-profile writes for chorus-plan and what --partition time balances by when
// no profile is given.
#pragma once

#include "options.hpp"

#include <chorus/train/gpt.hpp>

#include "plan/compute_profile.hpp"

namespace chorus::train_tool {

/// Times every block's forward and backward, the embedding's and the head's (with the loss) on
/// one process at tp 1 without recomputation and micro-batch b = --batch / --micro-batches
/// (the median of a few repetitions after a warm-up one); the blocks' mean forward, backward,
/// the embedding's and the head's again at every power of two below b (the "at" lines); the
/// blocks' mean backward under selective and under full recomputation at each of those sizes
/// (the "recompute" lines); and the optimizer's step with clipping per parameter.
plan::ComputeProfile profile_gpt(const Options& options, const train::GptConfig& config);

/// profile_gpt at b alone, without the other sizes and the optimizer (--partition time).
plan::ComputeProfile profile_gpt_blocks(const Options& options, const train::GptConfig& config);

}  // namespace chorus::train_tool
