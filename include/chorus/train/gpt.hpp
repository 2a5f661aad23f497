// A GPT-style language model over the tensor-parallel layers (tensor_parallel.hpp), with
// Megatron sequence parallelism as a flag (docs/parallel.md, "The GPT model").
//
//   tokens [s, b] -> VocabParallelEmbedding + learned position embedding (replicated)
//   L × pre-LayerNorm blocks:
//     x + RowParallel(attention(ColumnParallel QKV(LayerNorm(x))))   heads split over tp
//     x + RowParallel(GELU(ColumnParallel h -> 4h(LayerNorm(x))))   or x + MoE(LayerNorm(x))
//   final LayerNorm -> the embedding's tied logits -> vocab_parallel_cross_entropy, averaged
//
// Activations are [s, b, h]; under sequence parallelism everything outside attention and the
// MLP (embedding output, residual stream, LayerNorms) holds this rank's s/t slice of the
// sequence. Every weight comes from init_slice keyed by (seed, logical name), so the shards at
// degree t are slices of the degree-1 model's weights. The fused QKV weight [3h, h] orders its
// rows head by head: row (i·3 + p)·d + j is element j of part p (0 q, 1 k, 2 v) of head i,
// d = h/a (Megatron's layout), so rank r's contiguous rows are exactly its heads' q, k and v.
//
// Dropout (GptConfig::dropout > 0, while training) sits where GPT-2 and Megatron put it: on
// the embedding's output, on the attention probabilities, and on the outputs of attention and
// of the MLP before each residual add. Its masks do not depend on the layout: each element is
// a pure function of (seed, step, micro-batch, layer, site, its index in the degree-1 model's
// tensor over the whole batch), so a rank's mask is the slice of the one-process mask, and
// recomputation replays it from that key. set_step() says which step and micro-batch the
// next forward passes belong to.
//
// Ulysses context parallelism (the three-group constructor): the cp group's u ranks each hold
// s/u consecutive tokens of the sequence for everything outside the attention core (the
// embedding with those tokens' global positions, LayerNorms, MLP, loss); around the core an
// all-to-all turns the sequence split into a split of the tp rank's heads and back (one for
// the fused QKV and one for the context, forward and backward). The loss is the mean over all
// s·b tokens on every rank; each parameter's full gradient is the sum of its gradients over
// cp (over dp·cp with data parallelism: the gradient reducer over the dp_cp group).
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/moe.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::train {

/// Activation recomputation (Megatron's --recompute-granularity):
///   None       backward uses what forward kept;
///   Selective  the attention core (q·kᵀ, softmax, its dropout, ·v) keeps only q, k and v and is
///              recomputed in backward: the s²-sized tensors are never kept;
///   Full       each block keeps only its input and is run again in backward, collectives
///              included (under tp 6 all-reduces per block per step instead of 4; see
///              docs/parallel.md).
/// Gradients are those without recomputation (the same operations on the same values).
enum class Recompute { None, Selective, Full };

/// Mixture-of-experts MLPs (moe.hpp) in place of the dense MLP of block i when i % every == 0
/// (Megatron's --moe-layer-freq: every = 1 all blocks, 2 blocks 0, 2, 4, ...). The MoE layer of
/// block i is named "layers.i.moe" (its router "layers.i.moe.router.weight", its experts
/// "layers.i.moe.experts.<global expert>.fc1.weight", ...), and sees the tokens a rank holds in
/// sample-major order (sample by sample, each sample's positions in order), so that a routing
/// group of T tokens is the same tokens at every data- and context-parallel layout when T
/// divides the tokens of a sample a rank holds (s/u). The aux and z losses enter the gradient
/// where the layer runs (Megatron's MoEAuxLossAutoScaler), weighted by set_moe_loss_scale()
/// and 1/u, so the objective is the cross-entropy plus the sum over MoE blocks of their
/// losses averaged over the routing groups of the global batch.
struct GptMoeConfig {
  std::int64_t experts = 0;  ///< 0: every MLP is dense
  std::int64_t every = 1;    ///< block i is an MoE block when i % every == 0
  std::int64_t ffn = 0;      ///< each expert's inner size; 0: 4·hidden
  /// group_tokens 0: one sample's whole sequence (s tokens) per routing group.
  MoeRoutingOptions routing = {};
  double aux_loss_coef = 1e-2;
  double z_loss_coef = 0;
};

struct GptConfig {
  std::int64_t layers = 2;
  std::int64_t hidden = 24;
  std::int64_t heads = 12;
  std::int64_t vocab = 10;
  /// A vocabulary not a multiple of t is padded to one (tensor_parallel.hpp: padded logits
  /// are -inf in the loss, padded rows left out of checkpoints). False: such a vocabulary is
  /// refused at construction instead.
  bool pad_vocabulary = true;
  std::int64_t sequence = 12;  ///< the longest sequence (rows of the position embedding)
  bool sequence_parallel = false;
  std::uint64_t seed = 0;
  /// Weights ~ Normal(0, init_std); the two output projections of each block use
  /// init_std / sqrt(2L) (GPT-2). LayerNorm weights start at 1, every bias at 0.
  double init_std = 0.02;
  at::ScalarType dtype = at::kFloat;
  /// The drop probability of every dropout site, in [0, 1); 0: none (and no mask is drawn).
  double dropout = 0.0;
  Recompute recompute = Recompute::None;
  /// The linear layers defer their weight gradients (tensor_parallel.hpp): backward leaves them
  /// to compute_weight_gradients().
  bool defer_weight_gradients = false;
  GptMoeConfig moe = {};
};

/// What the MoE blocks did in the forward passes since the last take_moe_counters() (training
/// forwards only: with autograd recording), on this rank's tokens, summed over the MoE blocks.
struct GptMoeCounters {
  std::vector<std::int64_t> kept;   ///< [E]: assignments kept (sent to) per expert
  std::int64_t assignments = 0;     ///< tokens · k, per block
  std::int64_t dropped = 0;         ///< assignments over capacity
  double aux_loss = 0;              ///< sum of the blocks' aux losses (α·E·Σ f_i·P_i)
  double z_loss = 0;                ///< sum of the blocks' z-losses
  std::int64_t layer_forwards = 0;  ///< MoE block forwards counted
};

/// Which masks a forward pass draws: the optimizer step, the micro-batch within it, and the
/// global index of the micro-batch's first sample (a data-parallel replica's offset in the
/// global batch, so that replicas draw the masks the one-process model draws for their
/// samples).
struct DropoutPosition {
  std::uint64_t step = 0;
  std::uint64_t micro_batch = 0;
  std::int64_t first_sample = 0;
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
  /// is not a multiple of heads, heads (or, under sequence parallelism, sequence; without
  /// pad_vocabulary, vocab) is not a multiple of the tp group's size, or parts.blocks is neither
  /// empty nor of config.layers. `parts` says which parts this rank builds (a pipeline stage's);
  /// the default: all.
  GptModel(const GptConfig& config, const Group& tp, const GptParts& parts = {});
  /// With Ulysses context parallelism over `cp` as well: also InvalidArgument naming the
  /// numbers when heads/t or the sequence (s/t under sequence parallelism) is not a multiple
  /// of the cp group's size u. A group of one rank is the two-group model.
  GptModel(const GptConfig& config, const Group& tp, const Group& cp, const GptParts& parts = {});
  /// With mixture-of-experts blocks (config.moe) whose experts are split over `ep` (the mesh's
  /// expert group, which splits dp·cp): also InvalidArgument naming the numbers for what
  /// MoeLayer refuses (E not a multiple of ep, k outside {1, 2} or above E, a capacity factor
  /// ≤ 0 without dropless), every < 1, and for what the MoE blocks do not support: sequence
  /// parallelism and full recomputation. The other constructors refuse config.moe.experts > 0.
  GptModel(const GptConfig& config, const Group& tp, const Group& cp, const Group& ep,
           const GptParts& parts = {});
  ~GptModel();
  GptModel(GptModel&&) noexcept;
  GptModel& operator=(GptModel&&) noexcept;

  /// int64 tokens [s, b], s ≤ config.sequence (a multiple of t under sequence parallelism, of
  /// u under context parallelism) -> this rank's logits [s, b, padded_vocab(V, t) / t] (under
  /// context parallelism the rows of this cp rank's s/u tokens).
  at::Tensor logits(const at::Tensor& tokens) const;
  /// The mean over the s·b tokens of the cross-entropy of predicting `targets` [s, b] (the
  /// whole sequence on every cp rank); the same scalar on every rank.
  at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets) const;

  /// The forward pass in pieces, for pipeline stages that each run a contiguous part of it:
  /// logits(tokens) == head(run_blocks(embed(tokens), 0, layers)). `embed` checks the tokens as
  /// logits does and returns the embedded input [s, b, h] (this cp rank's s/u rows, and under
  /// sequence parallelism this tp rank's s/(u·t) of them); `run_blocks` runs blocks
  /// [first, first + count); `head` applies the final LayerNorm and the tied logits.
  at::Tensor embed(const at::Tensor& tokens) const;
  at::Tensor run_blocks(const at::Tensor& hidden, std::int64_t first, std::int64_t count) const;
  at::Tensor head(const at::Tensor& hidden) const;

  /// The position of the forward passes from now on (default step 0, micro-batch 0, sample 0).
  /// The contract: call it before each micro-batch's forward pass with a position that no other
  /// forward pass of the run uses (else their masks coincide). `embed` and `run_blocks` read it
  /// when called; backward and recomputation replay the masks of their forward pass whatever
  /// the position is by then. A pipeline sets it before each micro-batch's forward on each
  /// stage.
  void set_step(const DropoutPosition& position);
  const DropoutPosition& step() const;
  /// Training (default) applies dropout; evaluation (false) does not.
  void set_training(bool training);
  bool training() const;

  /// With config.defer_weight_gradients: adds to each linear layer's weight gradient what the
  /// backwards since the last call left pending (the zero-bubble W step) and returns how many
  /// (layer, backward) pairs that was. The embedding, LayerNorms and biases get their gradients
  /// in backward. A backward must want the weights' gradients to leave them pending
  /// (Tensor::backward does; autograd::grad with respect to the input alone does not).
  std::size_t compute_weight_gradients() const;
  std::size_t pending_weight_gradients() const;

  const GptConfig& config() const;
  /// The tensor-parallel group the model is split over.
  const Group& tp() const;
  /// The context-parallel group (none for the two-group constructor).
  const std::optional<Group>& cp() const;
  /// This cp rank's rows [c·s/u, (c+1)·s/u) of `x` [s, ...] (x itself without cp): the targets
  /// of its tokens. InvalidArgument naming the numbers when s is not a multiple of u.
  at::Tensor local_rows(const at::Tensor& x) const;
  /// The sum of `value` over the cp group, in place (nothing without cp): a loss summed over
  /// a cp rank's tokens becomes the whole sequence's. For reporting: not differentiable.
  void sum_over_cp(at::Tensor& value) const;
  /// Every built parameter in a fixed order (embedding, position embedding, blocks, final
  /// norm).
  std::vector<GptParameter> named_parameters() const;
  std::vector<at::Tensor> parameters() const;
  /// Parameters whose gradient on a rank covers its sequence slice only, so the full gradient
  /// is their sum over tp: under sequence parallelism the LayerNorms, the row-parallel biases
  /// and the position embedding; nothing otherwise.
  std::vector<at::Tensor> partial_gradient_parameters() const;

  /// The weight of the MoE aux and z losses in the gradients of the next backward passes
  /// (default 1): a micro-batch that carries 1/m of the step's loss passes 1/m.
  void set_moe_loss_scale(double scale);
  /// The built MoE blocks' layers, in block order (empty without config.moe).
  std::vector<const MoeLayer*> moe_layers() const;
  /// The MoE counters since the last call, then zeroes them (bookkeeping, not the model).
  GptMoeCounters take_moe_counters() const;

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
