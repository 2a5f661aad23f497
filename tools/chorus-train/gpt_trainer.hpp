// The GPT run of chorus-train (--model gpt): tensor parallelism over --tp ranks (with
// --sequence-parallel), Ulysses context parallelism over --cp ranks, a pipeline of --pp
// stages, data parallelism over world / (tp·cp·pp) replicas, on the fortunes corpus.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>

#include <string>

namespace chorus::train_tool {

/// Trains the GPT as `options` says on every rank of `comm`; rank 0 prints the progress
/// lines, the periodic validation loss and the final perplexity. Collective. InvalidArgument
/// naming the numbers, before any group is created, when tp·pp does not divide the world,
/// --cp does not divide world / (tp·pp), or --dp is given and dp·tp·cp·pp is not the world; the
/// model's sentence when the heads or --seq-len do not split over tp and cp.
void run_gpt_training(const Options& options, Communicator& comm);

/// --pp-dry-run: the schedule of `options` verified (local, no communicator), as text: the
/// schedule and the blocks of each stage, the verifier's timeline, and its bubble beside the
/// formula's (PARALLEL.md section 3). InvalidArgument naming the numbers for a schedule the
/// generator or the verifier refuses, or fewer blocks than stages.
std::string pipeline_dry_run(const Options& options);

/// --write-compute-profile: profiles the model of `options` on every rank of `comm` at once
/// (profile_gpt, collective); rank 0 writes the compute profile and returns its text, the
/// other ranks return "".
std::string write_gpt_compute_profile(const Options& options, Communicator& comm);

}  // namespace chorus::train_tool
