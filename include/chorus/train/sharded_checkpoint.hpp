// Checkpoints of sharded training state (ZeRO's, DDP's, one rank's) in the one checkpoint format
// (checkpoint_format.hpp), so that a job saved by one strategy at one dp size resumes under any
// other: ZeRO-1/2/3 at another dp size, DDP, one rank (docs/parallel.md, "Sharded checkpoints").
//
// A rank describes what it holds as a ShardedState: the model's parameters (logical pieces:
// name, global shape, dtype, the placements of the rank's local tensor, e.g. a tp shard), the
// tensors its optimizer was built over ("holders": a ZeRO rank's flat bucket shards, or the
// parameters themselves), and the spans saying which flat range of which parameter each holder
// range is. Each rank saves, for every span, the parameter's values and the optimizer's state
// for that range, as the parameter's pieces plus Flat(dp, offset, length) (Replicate(dp) when
// the state is replicated):
//
//   <name>                          the parameter's values
//   optimizer/<slot>/<name>         SGD: momentum_buffer; Adam, AdamW: exp_avg, exp_avg_sq (and
//                                   max_exp_avg_sq with amsgrad)
//   optimizer/step/<name>           Adam, AdamW: the step count, an int64 scalar
//
// A load computes the target layout's spans, reads the overlapping saved pieces (whatever dp
// size or strategy wrote them) and only then assigns parameters and optimizer state: a refused
// load (missing or truncated data file, checksum mismatch, another model or optimizer type,
// state not covering this rank's range) changes nothing. Hyperparameters (learning rate,
// betas, ...) are the constructing program's, not the checkpoint's.
//
// Errors are chorus::Error: InvalidArgument for a checkpoint that does not fit the model or
// optimizer, SystemError for files that are missing, truncated or corrupt; one line naming the
// checkpoint, the tensor or file and what is wrong.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/export.hpp>
#include <chorus/train/checkpoint.hpp>
#include <chorus/train/checkpoint_format.hpp>
#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train {

class GptModel;
struct GptConfig;
struct GptParameter;
class Zero3;
class ZeroOptimizer;

/// Elements [holder_offset, holder_offset + length) of the flattening of holder `holder` are
/// elements [parameter_offset, parameter_offset + length) of the flattening of parameter
/// `parameter`'s local tensor (its piece's data shape).
struct FlatSpan {
  std::size_t parameter = 0;
  std::int64_t parameter_offset = 0;
  std::size_t holder = 0;
  std::int64_t holder_offset = 0;
  std::int64_t length = 0;
};

/// What one rank holds of the training state. The holders' elements outside every span are
/// padding (saved nowhere, zero after a load).
struct ShardedState {
  /// Every trained parameter (every rank lists all) as the piece of its local tensor (placements:
  /// e.g. a tp shard; empty for a whole tensor). `data` is the local tensor when the rank holds it
  /// whole (DDP, ZeRO-1/2: a load fills it whole, and the holders' ranges of it), undefined when
  /// the rank holds only its spans.
  std::vector<TensorPiece> parameters;
  torch::optim::Optimizer* optimizer = nullptr;  ///< built over `holders`
  std::vector<at::Tensor> holders;               ///< contiguous tensors
  std::vector<FlatSpan> spans;
  std::string mesh_dim = "dp";  ///< the group the spans shard over: name, this rank, size
  int index = 0;
  int count = 1;
  bool replicated = false;  ///< every rank of the group holds every span (DDP, one rank)
  /// The parameters are all of the model's: a load of the RunConfig form refuses a checkpoint
  /// holding another tensor. False for a part of a model (a pipeline stage's, an expert rank's),
  /// whose checkpoint holds the other parts too.
  bool whole_model = true;
};

/// A module's parameters as whole pieces under their dotted names (data: the parameters).
CHORUS_EXPORT std::vector<TensorPiece> module_parameter_pieces(torch::nn::Module& model);

/// DDP's or one rank's state: `optimizer` over (some of) `parameters`' data, replicated over
/// `group` (e.g. Group{comm, "dp", nullptr}); the state's parameters are those the optimizer
/// holds, in its order. InvalidArgument when it holds a tensor that is none of `parameters`.
CHORUS_EXPORT ShardedState replicated_state(torch::optim::Optimizer& optimizer,
                                            std::vector<TensorPiece> parameters,
                                            const Group& group);

/// ZeRO-1/2's state: `parameters` name the tensors `zero` trains (matched by identity, any
/// order; pieces naming other tensors are saved by the module functions below as whole
/// tensors); spans from the reducer's bucket layouts, holders the parameter shards (with mixed
/// precision the fp32 masters, whose values are saved). A load fills every rank's parameters
/// whole (rounded to the compute type) and its shards: no refresh_from_shards() is needed.
/// InvalidArgument naming the index of a trained parameter none of `parameters` is.
CHORUS_EXPORT ShardedState zero_state(ZeroOptimizer& zero, std::vector<TensorPiece> parameters);

/// ZeRO-3's state: as zero_state with Zero3's unit shards; the parameters' data is left
/// undefined (the rank holds only its spans; a load fills the shards, which the next forward
/// gathers; with mixed precision zero.refresh_from_shards() must first round the loaded fp32
/// masters into the half blocks the gathers send). Load between steps (after finish_step and
/// step), not while a unit is gathered.
CHORUS_EXPORT ShardedState zero3_state(Zero3& zero, std::vector<TensorPiece> parameters);

/// ZeRO-3's state of the GPT model `zero` was built over (gpt_units(model)), in the GPT
/// checkpoint layout (gpt_checkpoint.hpp: logical names, the unsharded QKV order, tp
/// placements), so that the parameters and moments are saved as every GPT layout names them.
/// A span of the model's local layout that the saved layout reorders (QKV) becomes one span
/// per contiguous run. InvalidArgument as zero3_state.
CHORUS_EXPORT ShardedState gpt_zero3_state(const GptModel& model, Zero3& zero);

/// The same for GPT parameters trained whole (a pipeline stage's, split over `tp`, of a model
/// of `config`): DDP's state, `optimizer` over the parameters' tensors, replicated over
/// `group`. A load writes the parameters through the optimizer's tensors (the padding rows of
/// the vocabulary, saved nowhere, are left as they are). InvalidArgument as replicated_state.
CHORUS_EXPORT ShardedState gpt_replicated_state(const std::vector<GptParameter>& parameters,
                                                const GptConfig& config, const Group& tp,
                                                torch::optim::Optimizer& optimizer,
                                                const Group& group);
/// ZeRO-1/2's state of GPT parameters `zero` was built over. A load fills this rank's shards;
/// zero.refresh_from_shards() then makes every rank's parameters whole. InvalidArgument as
/// zero_state.
CHORUS_EXPORT ShardedState gpt_zero_state(const std::vector<GptParameter>& parameters,
                                          const GptConfig& config, const Group& tp,
                                          ZeroOptimizer& zero);

/// This rank's pieces of `state` (see the file comment). InvalidArgument for an optimizer other
/// than SGD, Adam or AdamW, or a span outside its parameter or holder.
CHORUS_EXPORT std::vector<TensorPiece> sharded_state_pieces(const ShardedState& state);

/// Collective over every rank: saves `model`'s parameters and optimizer state through `state`
/// (each rank its spans), its buffers and the parameters no span covers whole (written once),
/// with `training` and the model's description (submodules, optimizer type). Atomic as
/// save_tensor_checkpoint; every rank throws the first failing rank's sentence.
CHORUS_EXPORT void save_sharded_checkpoint(const std::string& path, torch::nn::Module& model,
                                           const ShardedState& state, const TrainingState& training,
                                           const chorus::Communicator& comm);

/// Local: loads a checkpoint saved by save_sharded_checkpoint, at any dp size and by any
/// strategy, into `model` and `state` (parameters and optimizer state) and returns the saved
/// TrainingState. Checks first, changing nothing when one fails: the submodules and tensors
/// (checkpoint.hpp's sentences), the optimizer type, every needed piece present and intact.
CHORUS_EXPORT TrainingState load_sharded_checkpoint(const std::string& path,
                                                    torch::nn::Module& model, ShardedState& state);

/// For a model that is no torch module (the GPT): `state` holds every tensor saved, and `model`
/// describes it (e.g. gpt_model_description; it must not name an "optimizer"); a load compares
/// the description first. Otherwise as the Module forms above.
CHORUS_EXPORT void save_sharded_checkpoint(const std::string& path, const RunConfig& model,
                                           const ShardedState& state, const TrainingState& training,
                                           const chorus::Communicator& comm);
/// InvalidArgument "checkpoint ck was saved from a model with hidden 24, this model has hidden
/// 16" when the descriptions differ, "checkpoint ck holds x, which the model does not have" for
/// a saved tensor none of the state's parameters is; then as the Module form.
CHORUS_EXPORT TrainingState load_sharded_checkpoint(const std::string& path, const RunConfig& model,
                                                    ShardedState& state);

/// Collective: resume_checkpoint's protocol (nullopt when rank 0 finds no file; the config
/// compared on every rank first; any rank's failure thrown on every rank, nothing changed by a
/// refused configuration) with load_sharded_checkpoint.
CHORUS_EXPORT std::optional<TrainingState> resume_sharded_checkpoint(
    const std::string& path, torch::nn::Module& model, ShardedState& state, const RunConfig& config,
    const chorus::Communicator& comm);

/// The same for a model described by `model` (the RunConfig forms above).
CHORUS_EXPORT std::optional<TrainingState> resume_sharded_checkpoint(
    const std::string& path, const RunConfig& model, ShardedState& state, const RunConfig& config,
    const chorus::Communicator& comm);

}  // namespace chorus::train
