// A GPT-style language model over the tensor-parallel layers (tensor_parallel.hpp), with
// Megatron sequence parallelism as a flag (docs/parallel.md, "The GPT model").
//
//   tokens [s, b] -> VocabParallelEmbedding + learned position embedding (replicated)
//   L × pre-LayerNorm blocks:
//     x + RowParallel(attention(ColumnParallel QKV(LayerNorm(x))))   heads split over tp
//     x + RowParallel(GELU(ColumnParallel h -> 4h(LayerNorm(x))))
//   final LayerNorm -> the embedding's tied logits -> vocab_parallel_cross_entropy, averaged
//
// Activations are [s, b, h]; under sequence parallelism everything outside attention and the
// MLP (embedding output, residual stream, LayerNorms) holds this rank's s/t slice of the
// sequence. Every weight comes from init_slice keyed by (seed, logical name), so the shards at
// degree t are slices of the degree-1 model's weights. The fused QKV weight [3h, h] orders its
// rows head by head: row (i·3 + p)·d + j is element j of part p (0 q, 1 k, 2 v) of head i,
// d = h/a (Megatron's layout), so rank r's contiguous rows are exactly its heads' q, k and v.
// No dropout.
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::train {

struct GptConfig {
  std::int64_t layers = 2;
  std::int64_t hidden = 24;
  std::int64_t heads = 12;
  std::int64_t vocab = 10;
  std::int64_t sequence = 12;  ///< the longest sequence (rows of the position embedding)
  bool sequence_parallel = false;
  std::uint64_t seed = 0;
  /// Weights ~ Normal(0, init_std); the two output projections of each block use
  /// init_std / sqrt(2L) (GPT-2). LayerNorm weights start at 1, every bias at 0.
  double init_std = 0.02;
  at::ScalarType dtype = at::kFloat;
};

/// One parameter as this rank holds it. `shard_dim` is the dimension of the full tensor the
/// tp ranks split in rank order (the embedding's rows over the padded vocabulary), or -1 when
/// every rank holds the whole tensor.
struct GptParameter {
  std::string name;  ///< the logical name ("layers.0.attention.qkv.weight")
  at::Tensor tensor;
  std::int64_t shard_dim = -1;
};

/// The parts of the model a GptModel builds: all of it by default; a pipeline stage builds
/// only its own (pipeline.hpp). A part not built holds no tensor and is left out of
/// named_parameters(); running it is an InvalidUsage error naming it. Built parts have the
/// values the whole model's have (the init is keyed by parameter name).
struct GptParts {
  bool embedding = true;           ///< the token embedding (tied with the logits)
  bool position_embedding = true;  ///< the learned position embedding
  bool final_norm = true;          ///< the final LayerNorm
  std::vector<bool> blocks;        ///< blocks[i]: build block i; empty: every block
};

class CHORUS_EXPORT GptModel {
 public:
  /// Collective-free. InvalidArgument naming the numbers when a size is not positive, hidden
  /// is not a multiple of heads, heads (or, under sequence parallelism, sequence) is not a
  /// multiple of the tp group's size, or parts.blocks is neither empty nor of config.layers.
  GptModel(const GptConfig& config, const Group& tp, const GptParts& parts = {});
  ~GptModel();
  GptModel(GptModel&&) noexcept;
  GptModel& operator=(GptModel&&) noexcept;

  /// int64 tokens [s, b], s ≤ config.sequence (a multiple of t under sequence parallelism) ->
  /// this rank's logits [s, b, padded_vocab(V, t) / t].
  at::Tensor logits(const at::Tensor& tokens) const;
  /// The mean over the s·b tokens of the cross-entropy of predicting `targets` [s, b]; the
  /// same scalar on every rank.
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets) const;

  /// The forward pass in pieces, for pipeline stages that each run a contiguous part of it:
  /// logits(tokens) == head(run_blocks(embed(tokens), 0, layers)). `embed` checks the tokens as
  /// logits does and returns the embedded input [s, b, h] (under sequence parallelism this
  /// rank's s/t rows); `run_blocks` runs blocks [first, first + count); `head` applies the final
  /// LayerNorm and the tied logits.
  at::Tensor embed(const at::Tensor& tokens) const;
  at::Tensor run_blocks(const at::Tensor& hidden, std::int64_t first, std::int64_t count) const;
  at::Tensor head(const at::Tensor& hidden) const;

  const GptConfig& config() const;
  /// The tensor-parallel group the model is split over.
  const Group& tp() const;
  /// Every built parameter in a fixed order (embedding, position embedding, blocks, final
  /// norm).
  std::vector<GptParameter> named_parameters() const;
  std::vector<at::Tensor> parameters() const;
  /// Parameters whose gradient on a rank covers its sequence slice only, so the full gradient
  /// is their sum over tp: under sequence parallelism the LayerNorms, the row-parallel biases
  /// and the position embedding; nothing otherwise.
  std::vector<at::Tensor> partial_gradient_parameters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Sums the gradients of `parameters` over `tp` in place, as one all-reduce of their
/// concatenation (one ledger entry); an undefined gradient counts as zero. Nothing is issued
/// when the list is empty or the group has one rank.
CHORUS_EXPORT void all_reduce_partial_gradients(const std::vector<at::Tensor>& parameters,
                                                const Group& tp);

}  // namespace chorus::train
