// ZeRO stages 1 and 2: data parallelism with the optimizer state (and, at stage 2, the
// gradients) sharded over the data-parallel group (libchorus_train, src/train/sharded/).
//
// Every rank holds the whole model. The parameters are re-seated into flat buffers laid out
// like the gradient reducer's buckets (reducer.hpp), each padded to a multiple of the group's
// size d; rank r owns block r of every bucket. A step:
//
//   zero.zero_grad();                 // stage 1: zeroes the gradient buckets
//   zero.begin_step();                // or begin_weighted_step(samples, samples)
//   loss.backward();                  // hooks reduce-scatter each bucket as it fills
//   zero.finish_step();               // this rank's gradient shards are final
//   zero.clip_grad_norm(1.0);         // optional: the global norm over the shards
//   zero.step();                      // the optimizer steps the shards; all-gather parameters
//
// Communication per step (recorded in the group's ledger): one reduce-scatter per bucket
// (during backward when overlap_backward) and one all-gather per bucket after the step, each
// of the padded bucket's bytes: DDP's volume. Nothing is issued on a group of one rank.
//
// The optimizer is any libtorch optimizer whose update is element-wise (SGD with momentum,
// Adam, AdamW, Adagrad, RMSprop): the factory receives this rank's parameter shards, one flat
// tensor per bucket, and its state therefore only covers the shards. Memory per rank, fp32 and
// Adam (K = 8 bytes of state per element): stage 1 4Ψ parameters + 4Ψ gradients + 8Ψ/d state;
// stage 2 4Ψ + 4Ψ/d + 8Ψ/d (Ψ counted with the padding, at most d - 1 elements per bucket).
//
// Mixed precision (ZeroOptions::mixed_precision = bf16 or fp16; the parameters must be fp32):
// the parameters become compute copies of that type (the model computes, the gradients are
// reduce-scattered and the parameters all-gathered in it), and the optimizer is built over
// fp32 master shards (block r of each bucket, rank 0's fp32 values at construction). step()
// upcasts the half gradient shards into the masters' gradients (freed after the step), steps
// them and rounds them into the half shards before the all-gathers. Memory per rank, Adam
// (PARALLEL.md section 3's mixed-precision lines, K = 12 with the masters): stage 1 2Ψ + 2Ψ +
// 12Ψ/d, stage 2 2Ψ + 2Ψ/d + 12Ψ/d. torch 1.13 has no fp16 matrix products on CPU: an fp16
// model computes through fp32 copies of its parameters (autograd casts the gradients back).
//
// This header only forward-declares torch's optimizer. Errors are chorus::Error:
// InvalidArgument for bad parameters or options, InvalidUsage for calls out of order.
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace chorus::train {

struct ZeroOptions {
  int stage = 1;                              ///< 1: optimizer state sharded; 2: gradients too
  std::size_t bucket_cap_bytes = 25u << 20;   ///< as ReducerOptions
  std::size_t first_bucket_bytes = 1u << 20;  ///< as ReducerOptions
  bool overlap_backward = true;               ///< reduce-scatters start during backward
  /// Gradient buckets (stage 1) and parameter buffers in memory a host's ranks share, so the
  /// reduce-scatters and all-gathers run in the peers' buffers (as ReducerOptions).
  bool shared_buckets = true;
  bool autograd_hooks = true;  ///< as ReducerOptions (false: mark_ready() only)
  /// Copies rank 0's parameters to every rank at construction (one broadcast per bucket).
  bool broadcast_parameters = true;
  /// begin_step()'s gradient is the sum over the group divided by this; 0: the group's size
  /// (as ReducerOptions: over a dp x cp group, dp sums the cp ranks' partial gradients).
  std::int64_t divisor = 0;
  /// Mixed precision (see the header comment): at::kBFloat16 or at::kHalf; nullopt: off.
  std::optional<at::ScalarType> mixed_precision{};
};

/// One piece of a rank's shard, for sharded checkpoints: elements [param_offset, param_offset
/// + length) of parameter `param` (its index in the list the sharding class was given,
/// flattened row-major) are elements [shard_offset, shard_offset + length) of the rank's shard
/// `shard`. A shard's elements covered by no piece are padding (zeros). Every ZeRO stage lays
/// out a flat buffer (a bucket at stages 1-2, a unit at stage 3) as its parameters end to end
/// in BucketLayout order, padded to a multiple of the group's size d, and rank r holds block r.
struct ShardPiece {
  std::size_t param = 0;
  std::int64_t param_offset = 0;
  std::int64_t length = 0;
  std::size_t shard = 0;
  std::int64_t shard_offset = 0;
  bool operator==(const ShardPiece&) const = default;
};

/// The pieces of rank `rank` of `ranks` for flat buffers `layouts` (shard k is block `rank` of
/// layouts[k]), ordered by shard then offset. Pure. InvalidArgument unless 0 <= rank < ranks
/// and every padded_numel is a multiple of ranks.
CHORUS_EXPORT std::vector<ShardPiece> shard_pieces(const std::vector<BucketLayout>& layouts,
                                                   int ranks, int rank);

/// The optimizer's state of one shard tensor, for sharded checkpoints: its state tensors by
/// libtorch's names ("momentum_buffer"; "exp_avg", "exp_avg_sq", "max_exp_avg_sq"; "sum";
/// "square_avg", "grad_avg"), each of the shard's size, and the step count (0 for SGD, which
/// keeps none). `tensors` is empty before the first step. The tensors are the optimizer's own:
/// writing into them sets the state. InvalidArgument for a tensor the optimizer does not hold
/// or a state of another type than SGD's, Adam's, AdamW's, Adagrad's or RMSprop's.
struct ShardState {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::int64_t step = 0;
};
CHORUS_EXPORT ShardState shard_state(const torch::optim::Optimizer& optimizer,
                                     const at::Tensor& shard);

/// Makes the optimizer over this rank's parameter shards (one flat tensor per bucket).
using ShardOptimizerFactory =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor> shards)>;

class CHORUS_EXPORT ZeroOptimizer {
 public:
  /// Collective over group.comm. Re-seats every trained parameter into its bucket's flat
  /// buffer (values kept; param.data() then aliases it), broadcasts them from rank 0 when
  /// asked, and builds the optimizer over the shards. InvalidArgument for a stage other than
  /// 1 or 2, the reducer's own refusals, or an optimizer that does not hold exactly the shards
  /// it was given.
  ZeroOptimizer(std::vector<at::Tensor> params, Group group, const ShardOptimizerFactory& make,
                ZeroOptions options = {});
  ~ZeroOptimizer();
  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  /// Stage 1: zeroes every gradient (the buckets param.grad() aliases). Stage 2: nothing is
  /// held between steps; frees any param.grad() left.
  void zero_grad();
  /// As GradientReducer's begin_step / begin_weighted_step / mark_ready.
  void begin_step();
  void begin_weighted_step(std::int64_t weight, std::int64_t samples);
  void mark_ready(const at::Tensor& param);
  /// Waits for every reduce-scatter: gradient_shards() then hold this step's mean gradient.
  /// Collective.
  void finish_step();
  /// Scales the gradient shards so that the global L2 norm (each element counted once: the
  /// shards are disjoint) is at most max_norm; returns the norm before. Collective (one fp64
  /// all-reduce). InvalidArgument unless max_norm > 0.
  double clip_grad_norm(double max_norm);
  /// The same for a model split over further groups (tp, pp, ...; each orthogonal to this
  /// optimizer's group): placements[i] says how parameter i (the constructor's order) lies
  /// over `groups`, and each shard piece of it is counted Sharded over this group besides
  /// (global_grad_norm's groups are `groups` then this group). Collective over every group.
  /// InvalidArgument unless max_norm > 0 and placements has one entry of groups.size()
  /// placements per parameter.
  double clip_grad_norm(double max_norm, const std::vector<std::vector<GradPlacement>>& placements,
                        const std::vector<Group>& groups);
  /// The optimizer's step on the shards, then one all-gather per bucket: every rank's
  /// parameters are the updated whole. Collective.
  void step();
  /// After this rank's parameter shards were written from outside (a sharded checkpoint's
  /// load): with mixed precision rounds the fp32 masters into the compute blocks, then one
  /// all-gather per bucket, so every rank's parameters are the shards' values. Collective.
  void refresh_from_shards();

  /// The optimizer over the shards (learning rate, state).
  torch::optim::Optimizer& optimizer();
  const GradientReducer& reducer() const;
  int stage() const;
  /// This rank's shards, one per bucket (launch order): parameters (with mixed precision the
  /// fp32 masters, the optimizer's) and reduced gradients (the compute type's).
  std::vector<at::Tensor> parameter_shards() const;
  std::vector<at::Tensor> gradient_shards() const;

  /// Where this rank's shards lie in the parameters (shard k is parameter_shards()[k]); see
  /// ShardPiece.
  std::vector<ShardPiece> shard_layout() const;
  /// Every trained parameter's value as the optimizer's shards hold it (with mixed precision the
  /// fp32 masters), whole: one all-gather per bucket, copies. Collective.
  std::vector<at::Tensor> master_parameters();

  /// Bytes this rank holds now (tensor sizes, padding included).
  struct Memory {
    std::int64_t parameters = 0;       ///< the flat parameter buffers (and the fp32 masters)
    std::int64_t gradients = 0;        ///< GradientReducer::gradient_bytes()
    std::int64_t optimizer_state = 0;  ///< the optimizer's state tensors
  };
  /// InvalidArgument when the optimizer's state is of a type other than libtorch's SGD, Adam,
  /// AdamW, Adagrad or RMSprop (its size is then unknown).
  Memory memory() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Bytes of the state tensors of libtorch's SGD, Adam, AdamW, Adagrad and RMSprop optimizers;
/// InvalidArgument naming the first state of another type.
CHORUS_EXPORT std::int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

}  // namespace chorus::train
