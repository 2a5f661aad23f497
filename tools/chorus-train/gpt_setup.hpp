// The GPT run's pieces built from the command line (gpt_trainer.cpp puts them together): the
// mesh, the model's configuration, the pipeline's groups, the options of the gradient reducer
// and of ZeRO-1/2, and the corpus as token samples.
#pragma once

#include "options.hpp"

#include <chorus/communicator.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/pipeline.hpp>
#include <chorus/train/reducer.hpp>
#include <chorus/train/zero.hpp>

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace chorus::train_tool {

constexpr std::int64_t kVocabulary = 256;  ///< byte-level tokens

/// The mesh of a tp × cp × dp × pp run. InvalidArgument naming the numbers, before any group
/// is created, when tp·pp does not divide the world, --cp does not divide world / (tp·pp), or
/// --dp is given and dp·tp·cp·pp is not the world.
train::Mesh make_mesh(const Options& options, const Communicator& comm);

/// The reducer's options (DataParallelSync: over dp_cp, the sum over cp and the mean over dp;
/// over cp alone in the steps --no-sync and --alternate-sync leave unsynchronised).
/// Micro-batches accumulate into the gradients: parameters are marked ready explicitly, by
/// the pipeline.
train::ReducerOptions reducer_options(const Options& options);

/// ZeRO-1/2 over dp_cp (as the reducer: the sum over cp divided by dp). Parameters are marked
/// ready once the step's backward and the tp sums of partial gradients have run; the ranks'
/// parameters are equal from the layout-independent initialisation (no broadcast).
train::ZeroOptions zero_options(const Options& options, const train::Mesh& mesh);

/// This rank's pipeline groups: pp and tp always; the embedding group on the first and last
/// of more than one stage; cp with context parallelism or experts; ep with experts.
train::PipelineGroups pipeline_groups(const train::Mesh& mesh, const Options& options);

/// The model of --layers, --hidden, --heads, --seq-len, --sequence-parallel, --seed,
/// --dropout, --recompute and the --moe-* options, over kVocabulary byte tokens.
train::GptConfig gpt_config(const Options& options);

/// A split of the corpus as samples: sample i is bytes [i·s, i·s + s + 1) (inputs and the
/// targets shifted by one), non-overlapping.
struct TokenSplit {
  torch::Tensor bytes;  ///< int64
  std::int64_t seq_len = 0;

  TokenSplit(const std::vector<std::uint8_t>& data, std::int64_t s);
  std::size_t samples() const;
  /// Tokens and targets [s, b] of the samples `indices`.
  std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<std::size_t>& indices) const;
};

}  // namespace chorus::train_tool
