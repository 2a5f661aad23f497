// The GPT run of chorus-train (--model gpt): tensor parallelism over --tp ranks (with
// --sequence-parallel), Ulysses context parallelism over --cp ranks, data parallelism over
// world / (tp·cp) replicas, on the fortunes corpus.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>

namespace chorus::train_tool {

/// Trains the GPT as `options` says on every rank of `comm`; rank 0 prints the progress
/// lines, the periodic validation loss and the final perplexity. Collective. InvalidArgument
/// naming both numbers, before any group is created, when --tp does not divide the world or
/// --cp does not divide world / tp; the model's sentence when the heads or --seq-len do not
/// split over tp and cp.
void run_gpt_training(const Options& options, Communicator& comm);

}  // namespace chorus::train_tool
