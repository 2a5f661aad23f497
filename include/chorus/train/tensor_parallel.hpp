// Megatron's tensor-parallel layers over one tensor-parallel Group (mesh.hpp).
//
// Every collective goes through the communicating autograd functions (autograd.hpp), so the
// group's ledger counts it; every weight is created with init_slice (random.hpp), so a
// layer's shards at degree t are exactly the slices of the degree-1 layer's full weights.
// Activations are laid out [s, b, h] as in Megatron: `sequence_dim` says where s is.
//
//   ColumnParallelLinear   W [out, in] split along out. Input replicated (copy_to_region:
//                          forward identity, backward all-reduce) or, under sequence
//                          parallelism, sharded along s (all-gathered forward, reduce-
//                          scattered backward). Output sharded along its last dimension, or
//                          gathered (gather_output).
//   RowParallelLinear      W [out, in] split along in. Input sharded along its last dimension
//                          (input_is_parallel) or split from a replicated input. Partial
//                          outputs all-reduced (reduce_from_region) or, under sequence
//                          parallelism, reduce-scattered along s; the bias is added once,
//                          after the reduction.
//   VocabParallelEmbedding The table [V, h] split in contiguous vocabulary ranges; a token
//                          outside the rank's range looks up zero; partial outputs reduced
//                          as in RowParallelLinear.
//                          logits() is the tied output layer over the same shard.
//   vocab_parallel_cross_entropy  per-token loss of logits sharded along the vocabulary,
//                          never gathered: 3 all-reduces of the token count forward (max,
//                          sum of exp, target logit), none backward.
//
// A vocabulary that is not a multiple of t is padded to one (padded_vocab): the padded rows
// of the embedding are zero and never looked up, padded logits are -inf in the loss (zero
// probability, zero gradient). Under sequence parallelism the row-parallel bias's gradient on
// each rank is the part of its own sequence slice: the sum over tp is the full gradient (the
// gradient reducer's all-reduce, PARALLEL.md section 2); partial_gradient_parameters() lists
// such parameters. Bad sizes throw chorus::Error(InvalidArgument) naming the numbers.
//
// Deferred weight gradients (defer_weight_gradient, for a pipeline's zero-bubble W step): the
// linear layers' backward then computes only the input gradient (with its collectives) and
// keeps the layer's input and output gradient; compute_weight_gradients() later computes
// Σ dyᵀ·x over every backward since the last call and adds it to weight().grad(). Biases keep
// their gradient in backward. Until that call weight().grad() lacks those contributions, so it
// must come before the gradients are reduced or stepped on; each pending backward keeps its
// tensors alive until then. Several backwards may be pending (micro-batches whose W steps come
// later, a graph run backward twice): the call computes them all, oldest first.
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::train {

namespace detail {
class WeightGradientStore;
}

/// How a layer's parameters are initialised: weight ~ Normal(0, init_std) keyed by
/// (seed, name + ".weight"); bias zero (Megatron's defaults).
struct ParameterInit {
  std::uint64_t seed = 0;
  std::string name;  ///< the layer's logical name ("layers.0.mlp.fc1")
  double init_std = 0.02;
  at::ScalarType dtype = at::kFloat;
};

struct ColumnParallelOptions {
  bool bias = true;
  bool gather_output = false;      ///< all-gather the output along its last dimension
  bool sequence_parallel = false;  ///< the input is sharded along sequence_dim
  std::int64_t sequence_dim = 0;
  bool defer_weight_gradient = false;  ///< see compute_weight_gradients()
};

class CHORUS_EXPORT ColumnParallelLinear {
 public:
  /// out_features must be a multiple of the group's size.
  ColumnParallelLinear(std::int64_t in_features, std::int64_t out_features, const Group& tp,
                       const ParameterInit& init, const ColumnParallelOptions& options = {});
  /// [..., in] -> [..., out/t] (or [..., out] with gather_output).
  at::Tensor forward(const at::Tensor& x) const;

  /// This rank's rows [rank · out/t, (rank + 1) · out/t) of the full weight [out, in].
  const at::Tensor& weight() const { return weight_; }
  /// This rank's slice of the bias (undefined without bias).
  const at::Tensor& bias() const { return bias_; }
  std::vector<at::Tensor> parameters() const;
  /// With defer_weight_gradient: adds the weight gradients of every backward since the last
  /// call to weight().grad() and returns how many backwards that was (0 without the option).
  std::size_t compute_weight_gradients() const;
  /// Backwards whose weight gradient compute_weight_gradients() has not yet added.
  std::size_t pending_weight_gradients() const;

 private:
  Group tp_;
  ColumnParallelOptions options_;
  at::Tensor weight_, bias_;
  std::shared_ptr<detail::WeightGradientStore> deferred_;  ///< set with defer_weight_gradient
};

struct RowParallelOptions {
  bool bias = true;
  bool input_is_parallel = true;   ///< else the full input is split along its last dimension
  bool sequence_parallel = false;  ///< reduce-scatter the output along sequence_dim
  std::int64_t sequence_dim = 0;
  bool defer_weight_gradient = false;  ///< see compute_weight_gradients()
};

class CHORUS_EXPORT RowParallelLinear {
 public:
  /// in_features must be a multiple of the group's size; sequence_parallel needs
  /// input_is_parallel (as in Megatron).
  RowParallelLinear(std::int64_t in_features, std::int64_t out_features, const Group& tp,
                    const ParameterInit& init, const RowParallelOptions& options = {});
  /// [..., in/t] (or [..., in]) -> [..., out], or its sequence slice under sequence parallelism.
  at::Tensor forward(const at::Tensor& x) const;

  /// This rank's columns [rank · in/t, (rank + 1) · in/t) of the full weight [out, in].
  const at::Tensor& weight() const { return weight_; }
  /// The whole bias, replicated (undefined without bias).
  const at::Tensor& bias() const { return bias_; }
  std::vector<at::Tensor> parameters() const;
  /// With defer_weight_gradient: adds the weight gradients of every backward since the last
  /// call to weight().grad() and returns how many backwards that was (0 without the option).
  std::size_t compute_weight_gradients() const;
  /// Backwards whose weight gradient compute_weight_gradients() has not yet added.
  std::size_t pending_weight_gradients() const;
  /// Parameters whose gradient must be summed over tp: the bias under sequence parallelism.
  std::vector<at::Tensor> partial_gradient_parameters() const;

 private:
  Group tp_;
  RowParallelOptions options_;
  at::Tensor weight_, bias_;
  std::shared_ptr<detail::WeightGradientStore> deferred_;  ///< set with defer_weight_gradient
};

/// `vocab` rounded up to a multiple of `ranks`.
CHORUS_EXPORT std::int64_t padded_vocab(std::int64_t vocab, int ranks);

/// Rank `rank`'s contiguous range of a vocabulary of `vocab` padded over `ranks`: ids
/// [start, start + length) of which the first `real` are in the vocabulary (the rest padding).
struct VocabRange {
  std::int64_t start = 0;
  std::int64_t length = 0;
  std::int64_t real = 0;
  bool operator==(const VocabRange&) const = default;
};
CHORUS_EXPORT VocabRange vocab_range(std::int64_t vocab, int rank, int ranks);

struct EmbeddingOptions {
  bool sequence_parallel = false;  ///< reduce-scatter the output along sequence_dim
  std::int64_t sequence_dim = 0;
};

class CHORUS_EXPORT VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(std::int64_t vocab, std::int64_t hidden, const Group& tp,
                         const ParameterInit& init, const EmbeddingOptions& options = {});
  /// int64 token ids in [0, vocab), any shape -> [..., hidden] (its sequence slice under
  /// sequence parallelism).
  at::Tensor forward(const at::Tensor& tokens) const;

  /// The tied output layer (Megatron's parallel_lm_logits): hidden [..., hidden] (its sequence
  /// slice under sequence parallelism) -> this rank's logits [..., padded/t] = hidden · Wᵀ,
  /// through copy_to_region (all-gathered along s under sequence parallelism). The padded
  /// columns are 0; vocab_parallel_cross_entropy ignores them.
  at::Tensor logits(const at::Tensor& hidden) const;

  /// Rows vocab_range(vocab, rank, t) of the padded table; padded rows are zero.
  const at::Tensor& weight() const { return weight_; }
  const VocabRange& range() const { return range_; }
  std::vector<at::Tensor> parameters() const { return {weight_}; }

 private:
  std::int64_t vocab_;
  Group tp_;
  EmbeddingOptions options_;
  VocabRange range_;
  at::Tensor weight_;
};

/// The per-token cross-entropy of `logits` [..., padded_vocab(vocab, t) / t], rank r holding
/// the columns of vocab_range(vocab, r, t), against int64 `targets` [...] in [0, vocab):
/// log Σ_v exp(z_v) − z_target over the real vocabulary. Differentiable in `logits`. bf16 and
/// fp16 logits are upcast: the loss is fp32 (the gradient returns in the logits' type).
CHORUS_EXPORT at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits,
                                                      const at::Tensor& targets, const Group& tp,
                                                      std::int64_t vocab);

}  // namespace chorus::train
