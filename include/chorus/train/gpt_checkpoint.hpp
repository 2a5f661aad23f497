// Checkpoints of the GPT model (gpt.hpp) in the shared format (checkpoint_format.hpp), loadable
// at any tensor-parallel degree whatever the degree that saved them.
//
// Every parameter is saved under its logical name in the unsharded layout:
//   - the embedding as [vocab, h]: the padding rows of the vocabulary-parallel table are left
//     out (rank r saves its real rows vocab_range(V, r, t)) and are zero again after a load;
//   - the fused QKV weight as [3, h, h] and its bias as [3, h]: part (q, k, v) first, then the
//     output feature i·d + j of head i, element j, then the input feature. The model keeps the
//     rows head-major (gpt.hpp); rank r's heads are indices [r·h/t, (r+1)·h/t) of dimension 1;
//   - every other sharded weight along the dimension the model splits, replicated ones whole.
// The checkpoint also records the model's description (gpt_model_description), which a load
// compares before anything else.
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/export.hpp>
#include <chorus/train/checkpoint_format.hpp>
#include <chorus/train/gpt.hpp>

#include <string>
#include <vector>

namespace chorus::train {

/// What a checkpoint must match whatever the layout: "model" gpt, "layers", "hidden", "heads",
/// "vocab", "sequence" (dtype is checked per tensor; seed and sequence parallelism do not
/// change the weights' meaning).
CHORUS_EXPORT RunConfig gpt_model_description(const GptConfig& config);

/// This rank's parameters as pieces of the unsharded layout over the model's tp group (copies
/// where the layout differs from the model's).
CHORUS_EXPORT std::vector<TensorPiece> gpt_checkpoint_pieces(const GptModel& model);
/// The same for `parameters`, some of a model of `config` split over `tp` (a pipeline stage's).
CHORUS_EXPORT std::vector<TensorPiece> gpt_checkpoint_pieces(
    const std::vector<GptParameter>& parameters, const GptConfig& config, const Group& tp);

/// Collective over every rank holding a part of the model (its tp group, and replicas of it):
/// save_tensor_checkpoint of gpt_checkpoint_pieces with `state` and the model's description.
CHORUS_EXPORT void save_gpt_checkpoint(const std::string& path, const GptModel& model,
                                       const TrainingState& state,
                                       const chorus::Communicator& comm);
/// The same for `parameters`, some of a model of `config` split over `tp`: each pipeline stage
/// passes its own, so the checkpoint holds the whole model, as one process would save it.
CHORUS_EXPORT void save_gpt_checkpoint(const std::string& path,
                                       const std::vector<GptParameter>& parameters,
                                       const GptConfig& config, const Group& tp,
                                       const TrainingState& state,
                                       const chorus::Communicator& comm);

/// Local: loads the checkpoint at `path` into this rank's parameters and returns its state.
/// InvalidArgument "checkpoint ck was saved from a model with hidden 24, this model has hidden
/// 16" when the descriptions differ, then load_tensor_checkpoint's checks; nothing is changed
/// when any check fails.
CHORUS_EXPORT TrainingState load_gpt_checkpoint(const std::string& path, GptModel& model);
/// The same into `parameters` only, some of a model of `config` split over `tp` (a pipeline
/// stage's), whatever layout saved the checkpoint.
CHORUS_EXPORT TrainingState load_gpt_checkpoint(const std::string& path,
                                                const std::vector<GptParameter>& parameters,
                                                const GptConfig& config, const Group& tp);

}  // namespace chorus::train
