// Checkpoints of a torch::nn::Module and its optimizer (see docs/training.md), in the format
// every strategy shares (checkpoint_format.hpp): the module's parameters and buffers under
// their dotted names, the optimizer's state, the TrainingState and the configuration the run
// was made from. A checkpoint is loaded only into a model of the saved module structure whose
// every tensor has the saved shape and an optimizer of the saved type, and a resume refuses a
// run whose configuration differs, with a sentence naming what differs.
//
// This header only forward-declares torch types: including it does not pull <torch/torch.h>.
// Errors are chorus::Error: InvalidArgument for a checkpoint that does not fit the model,
// optimizer or configuration, or a path that cannot be written; SystemError for I/O failures.
#pragma once

#include <chorus/communicator.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace chorus::train {

/// Settings a run was made from, by name (e.g. "--hidden" -> "128", "world size" -> "2").
using RunConfig = std::map<std::string, std::string>;

/// Training progress saved with a checkpoint.
struct TrainingState {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  /// Anything else to restore, e.g. the sampler's position.
  std::map<std::string, std::int64_t> extra;
  /// What the run was made from; saved verbatim, compared by resume_checkpoint.
  RunConfig config;
};

/// Collective, before training: rank 0 (the rank that writes checkpoints) checks that it can
/// create `path` (its directory exists, is a directory and lets it create path + ".tmp";
/// `path` is not a directory). Every rank returns, or every rank throws InvalidArgument with
/// rank 0's sentence, e.g. "checkpoint /x/ck.pt cannot be written: directory /x does not
/// exist".
void check_checkpoint_path(const std::string& path, const chorus::Communicator& comm);

/// Collective: rank 0 writes model parameters and buffers, optimizer state and `state` as a
/// checkpoint at `path` (an index at `path` and a data file beside it, each written to a
/// temporary and renamed: a reader sees the previous checkpoint or the new one); the call
/// returns on every rank once the index is in place, or throws on every rank with rank 0's
/// reason ("save_checkpoint(<path>) failed on rank 0: ...").
void save_checkpoint(const std::string& path, torch::nn::Module& model,
                     torch::optim::Optimizer& opt, const TrainingState& state,
                     const chorus::Communicator& comm);

/// Local: the TrainingState of checkpoint `path` (config included), without touching a model.
/// Throws SystemError when the index is missing, malformed, truncated or corrupt.
TrainingState read_checkpoint_state(const std::string& path);

/// Local: reads a checkpoint written by save_checkpoint into `model` and `opt` and returns the
/// saved TrainingState. Before anything is changed it checks that the file holds the model's
/// submodules and no other, every parameter and buffer of `model` with the same shape and
/// dtype and no tensor the model lacks, and that `opt` is of the saved optimizer type;
/// otherwise it throws InvalidArgument naming the module or tensor and both shapes (or both
/// types). SystemError when a file is missing, malformed, truncated or corrupt.
TrainingState load_checkpoint(const std::string& path, torch::nn::Module& model,
                              torch::optim::Optimizer& opt);

/// Pure: "" when `saved` and `current` agree, else one sentence naming every setting that
/// differs with both values, e.g. "checkpoint ck.pt was made with --hidden 128, this run has
/// --hidden 64" (a setting one side lacks shows as "(not recorded)"; a checkpoint that records
/// no settings at all gets a sentence saying so).
std::string config_difference(const std::string& path, const RunConfig& saved,
                              const RunConfig& current);

/// Collective: resumes from `path` if rank 0 finds a file there (nullopt, nothing loaded, when
/// it does not). Every rank reads the file and refuses it when its config differs from
/// `config` (config_difference's sentence); only when no rank refused does every rank load it
/// with load_checkpoint's checks. When any rank fails, every rank throws the same sentence; a
/// configuration refused leaves every rank's `model` and `opt` untouched.
std::optional<TrainingState> resume_checkpoint(const std::string& path, torch::nn::Module& model,
                                               torch::optim::Optimizer& opt,
                                               const RunConfig& config,
                                               const chorus::Communicator& comm);

}  // namespace chorus::train
