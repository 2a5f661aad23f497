// The GPT run of chorus-train (--model gpt): tensor parallelism over --tp ranks (with
// --sequence-parallel), data parallelism over world / tp replicas, on the fortunes corpus.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>

namespace chorus::train_tool {

/// Trains the GPT as `options` says on every rank of `comm`; rank 0 prints the progress
/// lines, the periodic validation loss and the final perplexity. Collective. InvalidArgument
/// naming both numbers, before any group is created, when --tp does not divide the world.
void run_gpt_training(const Options& options, Communicator& comm);

}  // namespace chorus::train_tool
