// Checkpoints of chorus-train's GPT run, in the one checkpoint format (gpt_checkpoint.hpp), so
// a run saved at one tensor-parallel degree and pipeline depth resumes at any other (each
// pipeline stage saves and loads its own parameters):
//   PATH              the model's parameters and the TrainingState (save_gpt_checkpoint);
//   PATH.<slot>       each of the optimizer's per-parameter state tensors (Adam: exp_avg and
//                     exp_avg_sq; SGD: momentum_buffer) as a GPT checkpoint of its own, laid
//                     out like the parameter it belongs to.
// The slots are written before PATH and carry the same step, so a load that finds a slot of
// another step (a save interrupted between the files) refuses it. The optimizer's state is
// saved whole per parameter whether it was sharded over the data-parallel ranks (ZeRO-1/2) or
// not, so a checkpoint resumes with or without ZeRO. Includes torch.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/checkpoint.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/zero.hpp>

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

/// The optimizer's state as a checkpoint holds it: slots[k][i] is state tensor k (Adam:
/// exp_avg, exp_avg_sq; SGD: momentum_buffer) of the share's parameter i, shaped like it
/// (undefined: zeros); no slots before the first optimizer step.
struct GptOptimizerState {
  std::vector<std::vector<torch::Tensor>> slots;
  std::int64_t step = 0;  ///< Adam's step count (SGD: steps taken); 0 = no state yet
};

/// Local: the state of `optimizer` over the share's parameters after `steps` steps.
GptOptimizerState optimizer_state(torch::optim::Optimizer& optimizer, OptimizerKind kind,
                                  const GptShare& share, std::int64_t steps);
/// Local: replaces the optimizer's state by `state`.
void set_optimizer_state(torch::optim::Optimizer& optimizer, OptimizerKind kind,
                         const GptShare& share, const GptOptimizerState& state);

/// Collective over zero's group: the state of its shards, all-gathered and laid out per
/// parameter (the order of the parameters it was built over).
GptOptimizerState zero_optimizer_state(train::ZeroOptimizer& zero, OptimizerKind kind,
                                       std::int64_t steps);
/// Local: each shard's state cut from `state`'s whole tensors.
void set_zero_optimizer_state(train::ZeroOptimizer& zero, OptimizerKind kind,
                              const GptOptimizerState& state);

/// Collective over `comm` (every rank of the mesh): writes the slots, then PATH.
void save_gpt_run(const std::string& path, const GptShare& share,
                  const GptOptimizerState& optimizer, OptimizerKind kind,
                  const train::TrainingState& state, const Communicator& comm);

struct GptRunState {
  train::TrainingState state;
  GptOptimizerState optimizer;
};

/// Local: nullopt when there is no file at `path`. Otherwise refuses (InvalidArgument, before
/// anything changes) a checkpoint whose recorded configuration differs from `config` (the
/// sentence of train::config_difference) or whose model differs (load_gpt_checkpoint's), then
/// loads the model's parameters and returns the saved state and the optimizer's.
std::optional<GptRunState> load_gpt_run(const std::string& path, const GptShare& share,
                                        OptimizerKind kind, const train::RunConfig& config);

}  // namespace chorus::train_tool
