// The training loop of chorus-train (torch stays inside trainer.cpp and tasks.cpp).
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>

namespace chorus::train_tool {

/// Trains and evaluates as `options` says on every rank of `comm`; rank 0 prints the
/// progress lines, a summary and the test metrics. Collective.
void run_training(const Options& options, Communicator& comm);

}  // namespace chorus::train_tool
