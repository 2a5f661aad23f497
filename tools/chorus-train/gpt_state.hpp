// Checkpoints of chorus-train's GPT run, in the one checkpoint format (gpt_checkpoint.hpp), so
// a run saved at one tensor-parallel degree and pipeline depth resumes at any other (each
// pipeline stage saves and loads its own parameters):
//   PATH              the model's parameters and the TrainingState (save_gpt_checkpoint);
//   PATH.<slot>       each of the optimizer's per-parameter state tensors (Adam: exp_avg and
//                     exp_avg_sq; SGD: momentum_buffer) as a GPT checkpoint of its own, laid
//                     out like the parameter it belongs to.
// The slots are written before PATH and carry the same step, so a load that finds a slot of
// another step (a save interrupted between the files) refuses it. Includes torch.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/checkpoint.hpp>
#include <chorus/train/gpt.hpp>

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

namespace chorus::train_tool {

/// The parameters a rank trains: some of a model of `config` split over `tp`.
struct GptShare {
  std::vector<train::GptParameter> parameters;
  train::GptConfig config;
  train::Group tp;
};

/// Collective over `comm` (every rank of the mesh): writes the slots, then PATH.
void save_gpt_run(const std::string& path, const GptShare& share,
                  torch::optim::Optimizer& optimizer, OptimizerKind kind,
                  const train::TrainingState& state, const Communicator& comm);

/// Local: nullopt when there is no file at `path`. Otherwise refuses (InvalidArgument, before
/// anything changes) a checkpoint whose recorded configuration differs from `config` (the
/// sentence of train::config_difference) or whose model differs (load_gpt_checkpoint's), then
/// loads the model's parameters and the optimizer's state and returns the saved state.
std::optional<train::TrainingState> load_gpt_run(const std::string& path, const GptShare& share,
                                                 torch::optim::Optimizer& optimizer,
                                                 OptimizerKind kind,
                                                 const train::RunConfig& config);

}  // namespace chorus::train_tool
