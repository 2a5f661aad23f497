// The gradient reducer: gradients of a set of parameters averaged over any group, in buckets
// whose all-reduces overlap backward (libchorus_train). DistributedDataParallel (ddp.hpp) runs
// on it; model-parallel strategies use it directly, over a mesh group (docs/parallel.md).
//
// A step: begin_step() (or begin_weighted_step()), then every parameter is marked ready once —
// by the autograd hook installed on its gradient accumulator (fires right after autograd has
// accumulated param.grad()), or explicitly with mark_ready() once param.grad() holds its final
// value (a pipeline's deferred weight-gradient step, which bypasses the accumulator) — then
// finish_step(). A bucket's non-blocking all-reduce starts as soon as all its parameters are
// ready and every earlier bucket has started (all ranks must issue the same sequence);
// finish_step() waits for them and leaves the reduced gradient in each param.grad(), which then
// shares its slice of the bucket's storage (the next backward accumulates into it in place).
//
// Buckets hold one dtype each (fp16, bf16, fp32 or fp64; CPU tensors), assigned by
// assign_buckets() per dtype, so the layout is a pure function of the parameters. Every
// collective goes through the Group and is recorded in its ledger (one entry per all-reduce);
// on a group of one rank nothing is issued or recorded. Thread-safe: autograd may run the hooks
// on another thread than the one calling the step functions.
//
// Sharding (ReducerOptions::sharding, for ZeRO, zero.hpp): each bucket is padded to a multiple
// of the group's size d and reduce-scattered instead of all-reduced; after finish_step() rank r
// holds block r of the reduced bucket (gradient_shard()), and param.grad() is not the reduced
// gradient. With GradSharding::Keep the bucket stays allocated (param.grad() aliases it as
// above, so backward accumulates in place, and the shard is block r of it: an in-place
// reduce-scatter); with GradSharding::Release the bucket is allocated when its first gradient
// is ready, each param.grad() is freed (reset) once copied into it, and the bucket is freed as
// soon as its reduce-scatter into the separate shard has completed.
//
// Errors are chorus::Error: InvalidArgument for bad parameters or options, InvalidUsage for
// calls out of order, the communicator's errors otherwise.
#pragma once

#include <chorus/export.hpp>
#include <chorus/train/buckets.hpp>
#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace chorus::train {

/// How the reducer leaves its result (see the header comment).
enum class GradSharding {
  None,     ///< all-reduce: every param.grad() holds the whole reduced gradient
  Keep,     ///< reduce-scatter in place: full buckets kept, this rank's block reduced
  Release,  ///< reduce-scatter into shards: full buckets freed once scattered
};

/// One bucket's layout: which parameters, where, and how it is padded for sharding.
struct BucketLayout {
  std::vector<std::size_t> params;    ///< parameter indices, in launch order
  std::vector<std::int64_t> offsets;  ///< element offset of each inside the bucket
  std::int64_t numel = 0;             ///< elements of the parameters
  /// numel rounded up to a multiple of the group's size when sharding (the padding is zeros),
  /// else numel. A rank's shard is padded_numel / size elements, block rank of the bucket.
  std::int64_t padded_numel = 0;
  at::ScalarType type = at::kFloat;
};

struct ReducerOptions {
  std::size_t bucket_cap_bytes = 25u << 20;   ///< cap of every bucket but the first of a dtype
  std::size_t first_bucket_bytes = 1u << 20;  ///< small first bucket: communication starts early
  GradCompression compression = GradCompression::None;
  /// Buckets (with compression: their half-type copies) in memory the group's ranks on a host
  /// share (Communicator::alloc_shared, collective at construction): their all-reduces then
  /// work in the peers' buckets in place. Ordinary memory across hosts or when it cannot be had.
  bool shared_buckets = true;
  /// True: a bucket starts from the mark_ready() (or hook) that completes it. False: every
  /// bucket starts in finish_step().
  bool overlap_backward = true;
  /// True: a post-accumulation hook on each parameter's gradient accumulator marks it ready.
  /// False: only mark_ready() does (hooks would mark the parameters of every micro-batch).
  bool autograd_hooks = true;
  /// True: a parameter not marked ready by finish_step() is reduced as zeros (a branch not
  /// taken). False: it is an InvalidArgument error at finish_step().
  bool zero_missing = false;
  /// begin_step()'s gradient is the sum over the group divided by this; 0: the group's size.
  /// (Expert gradients are summed over the expert-data-parallel group and divided by dp·cp.)
  std::int64_t divisor = 0;
  /// Reduce-scatter instead of all-reduce (ZeRO). InvalidArgument with compression.
  GradSharding sharding = GradSharding::None;
  /// Explicit buckets (parameter indices, launch order; each index within a bucket in layout
  /// order) instead of assign_buckets(): ZeRO-3 makes one bucket per unit. Every parameter
  /// that requires a gradient must be in exactly one, each bucket of one dtype, else
  /// InvalidArgument. Empty: the caps above decide.
  std::vector<std::vector<std::size_t>> buckets;
};

class CHORUS_EXPORT GradientReducer {
 public:
  /// Collective over group.comm when shared_buckets (the buckets' memory). Parameters without
  /// requires_grad are kept (indices stay those of `params`) but never reduced. InvalidArgument
  /// for an empty communicator, a negative divisor, a trained parameter that is not a floating
  /// CPU tensor (or, with autograd_hooks, not a leaf), or a tensor listed twice.
  GradientReducer(std::vector<at::Tensor> params, Group group, ReducerOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// Starts a step whose reduced gradient is sum_r grad_r / divisor. InvalidUsage when a step is
  /// active.
  void begin_step();
  /// Starts a step whose reduced gradient is the weighted mean
  ///   sum_r weight_r · grad_r / sum_r samples_r
  /// (DDP: weight_r = the samples param.grad() is a mean over, samples_r = all this rank's
  /// samples in the step). Issues one non-blocking all-reduce of (samples, weight, weight²)
  /// before any bucket; hooks never wait for it (gradients stay unscaled in their buckets until
  /// it has arrived). When every rank's share weight_r / sum samples is 1 / ranks, buckets are
  /// all-reduced with Avg and never scaled. A rank whose weight is 0 contributes zeros and need
  /// not mark anything ready. InvalidArgument for a negative count.
  void begin_weighted_step(std::int64_t weight, std::int64_t samples);

  /// param.grad() of parameter `index` (or of the tensor `param`) is final for this step (an
  /// undefined grad counts as zeros). InvalidArgument for an unknown tensor, an index out of
  /// range or a parameter without requires_grad; InvalidUsage outside a step or when it was
  /// already marked in this step. (Hooks outside a step do nothing: accumulation micro-batches.)
  void mark_ready(std::size_t index);
  void mark_ready(const at::Tensor& param);

  /// Starts what is left, waits for every bucket and leaves the reduced gradients in
  /// param.grad(). Collective. When a parameter was not marked ready (and zero_missing is
  /// false) or a hook marked one twice, the rank still issues every remaining bucket (its
  /// missing slots as zeros, so its peers do not wait for it), then throws naming the
  /// parameters; its gradients are then not those of the step. InvalidUsage outside a step.
  void finish_step();

  bool step_active() const;
  const Group& group() const;
  /// The parameters as given (indices of mark_ready and bucket_assignment).
  const std::vector<at::Tensor>& parameters() const;
  /// Parameter indices per bucket, in launch order.
  std::vector<std::vector<std::size_t>> bucket_assignment() const;
  /// Every bucket's layout, in launch order.
  std::vector<BucketLayout> bucket_layouts() const;
  /// With sharding, after finish_step(): this rank's block of bucket `bucket`'s reduced
  /// gradient (padded_numel / size elements, the padding's share zeros). The tensor stays the
  /// same from step to step (a caller may hand it to an optimizer as a gradient); its values
  /// are those of the last finished step. InvalidUsage without sharding, InvalidArgument for a
  /// bucket out of range.
  at::Tensor gradient_shard(std::size_t bucket) const;
  /// Bytes of gradient memory alive now: the buckets allocated, the separate shards, and every
  /// param.grad() that does not share a bucket's storage.
  std::int64_t gradient_bytes() const;

  struct Stats {
    double seconds_waiting = 0;        ///< in finish_step(), for buckets: communication not hidden
    double seconds_to_last_ready = 0;  ///< begin of step to the last parameter marked ready
    std::int64_t bytes_reduced = 0;    ///< bytes this rank passed to bucket all-reduces
    std::int64_t buckets_launched_early = 0;  ///< all-reduces started by mark_ready / a hook
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// For the global norm: how a gradient lies over one group's ranks.
enum class GradPlacement {
  Sharded,     ///< each rank holds a different piece (tp shards, pipeline stages, experts)
  Replicated,  ///< every rank holds the same tensor (tp-replicated LayerNorms, dp after sync)
};

/// One rank's piece of the global gradient: placements[g] says how it lies over groups[g].
struct NormPiece {
  at::Tensor grad;  ///< undefined: contributes nothing
  std::vector<GradPlacement> placements;
};

/// The L2 norm of the logical gradient, identical on every rank: each logical element counted
/// once. A rank counts a piece when it is rank 0 of every group the piece is Replicated over;
/// the squared sums (in fp64) are then all-reduced over each group in turn (groups of one rank
/// are skipped), so pieces Sharded over a group are summed across it. The groups must be
/// orthogonal (no two share a dimension of the mesh), e.g. {tp, pp} or {tp, pp, ep}.
/// InvalidArgument when a piece has another number of placements than there are groups.
CHORUS_EXPORT double global_grad_norm(const std::vector<NormPiece>& pieces,
                                      const std::vector<Group>& groups);

/// global_grad_norm(), then every piece's grad scaled in place by max_norm / (norm + 1e-6)
/// when that is below 1 (PyTorch's clip_grad_norm_ rule). Returns the norm before clipping.
/// InvalidArgument unless max_norm > 0.
CHORUS_EXPORT double clip_grad_norm(const std::vector<NormPiece>& pieces,
                                    const std::vector<Group>& groups, double max_norm);

}  // namespace chorus::train

namespace chorus::train {

/// The data-parallel gradient synchronisation of a model-parallel layout (dp × cp, any tp and
/// pp), with steps that skip dp (DDP's no_sync, chorus-train's --no-sync and --alternate-sync):
///   a synchronised step reduces over the mesh's dp_cp group, the sum over cp divided by dp;
///   an unsynchronised step reduces over cp only, the sum (each cp rank's gradient covers its
///   own tokens, so the replica's model needs it), and nothing crosses dp: every replica then
///   steps on the gradient of its own samples.
/// A step: begin_step(synced), the step's gradients marked ready on reducer() (its hooks, or
/// mark_ready; null: nothing to reduce), finish_step(). The tp partial gradients of sequence
/// parallelism (all_reduce_partial_gradients) stay the caller's, in every step.
class CHORUS_EXPORT DataParallelSync {
 public:
  /// Collective over the mesh's dp_cp group (and, with `unsynced_steps` and cp > 1, its cp
  /// group: a second reducer, with its own buckets). `options.divisor` is ignored (set as
  /// above). Without `unsynced_steps`, begin_step(false) is InvalidUsage.
  DataParallelSync(const std::vector<at::Tensor>& params, const Mesh& mesh, ReducerOptions options,
                   bool unsynced_steps);
  ~DataParallelSync();
  DataParallelSync(const DataParallelSync&) = delete;
  DataParallelSync& operator=(const DataParallelSync&) = delete;

  /// Begins a step, synchronised over dp or not. InvalidUsage when a step is active.
  void begin_step(bool synced);
  /// The reducer of the active step; null in an unsynchronised step at cp 1 (no reduction).
  GradientReducer* reducer() const;
  /// Finishes the active step's reduction (GradientReducer::finish_step). InvalidUsage
  /// outside a step.
  void finish_step();
  /// The group the step's gradients are now the same on, for global_grad_norm's Replicated
  /// placement: dp_cp after a synchronised step, cp after an unsynchronised one.
  const Group& replica_group() const;
  /// The reducer of the synchronised steps (its stats, its bucket layout).
  const GradientReducer& synced_reducer() const;

 private:
  std::unique_ptr<GradientReducer> synced_, context_;
  Group data_context_, cp_;
  bool unsynced_steps_ = false, active_ = false, synced_step_ = true;
};

}  // namespace chorus::train
