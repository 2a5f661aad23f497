// Chorus data-parallel training over libtorch (libchorus_train).
//
// DistributedDataParallel wraps a torch::nn::Module whose replica lives on every rank of a
// communicator. At construction parameters (and buffers) are broadcast from rank 0; after each
// backward the gradients are averaged over all ranks, weighted by each rank's sample count, so
// every replica takes the same optimizer step. The reduction is a GradientReducer (reducer.hpp):
// flat buckets whose non-blocking all-reduce starts from an autograd hook as soon as the
// bucket's last gradient is accumulated, so communication overlaps the rest of backward. See
// docs/training.md.
//
// This header only forward-declares torch types: including it does not pull <torch/torch.h>.
// Errors are chorus::Error (InvalidArgument for misuse, the communicator's errors otherwise).
#pragma once

#include <chorus/communicator.hpp>
// GradCompression and assign_buckets (plain C++).
#include <chorus/train/buckets.hpp>
// The checkpoint API; it also forward-declares torch::nn::Module and torch::optim::Optimizer.
#include <chorus/train/checkpoint.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus::train {

struct DdpOptions {
  std::size_t bucket_cap_bytes = 25u
                                 << 20;  ///< cap of every bucket but the first (PyTorch's default)
  std::size_t first_bucket_bytes = 1u << 20;  ///< small first bucket, so communication starts early
  /// When true, parameters that received no gradient in a step are reduced as zeros. When false,
  /// a parameter without gradient at finish_gradient_sync() is an InvalidArgument error.
  bool find_unused_parameters = false;
  /// Buffers (e.g. batch-norm statistics) are broadcast from rank 0 at construction, and before
  /// each backward (in prepare_for_backward) when this is true.
  bool broadcast_buffers = true;
  GradCompression compression = GradCompression::None;
  /// Gradient buckets (with compression: their fp16/bf16 copies, which are what is
  /// all-reduced) in memory the ranks of a host share (Communicator::alloc_shared): their
  /// all-reduces then read and write the peers' buckets in place, with no copy through the
  /// communicator's arena. Ordinary memory where the ranks do not share a host.
  bool shared_buckets = true;
  /// When true, a bucket's all-reduce starts from the gradient hook that completes it, so it
  /// overlaps the rest of backward. When false, every bucket is all-reduced in
  /// finish_gradient_sync() (to measure what the overlap buys; where the ranks already keep
  /// every core busy computing, overlap only moves the reduction's work into backward).
  bool overlap_backward = true;
  /// > 0: local SGD. Gradients are not synchronised; after_optimizer_step() averages the
  /// parameters over all ranks every N steps.
  int average_parameters_every = 0;
};

class DistributedDataParallel {
 public:
  /// Collective over `comm`. Broadcasts parameters and buffers from rank 0, assigns buckets and
  /// installs the gradient hooks. The module must not gain or lose parameters afterwards.
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, chorus::Communicator comm,
                          DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  torch::nn::Module& module();
  const chorus::Communicator& communicator() const;

  /// Called before each backward with this rank's number of samples in the step (0 allowed).
  /// The averaged gradient is sum_r(local_samples_r * grad_r) / sum_r(local_samples_r), so unequal
  /// per-rank batches give the mean gradient of the global batch (the loss must be a per-rank
  /// mean). Inside a no_sync() scope it only adds to the pending sample count.
  void prepare_for_backward(std::int64_t local_samples);

  /// Waits for every bucket and writes the averaged gradients into each param.grad(). Call after
  /// backward and before optimizer.step(). Collective.
  void finish_gradient_sync();

  /// RAII scope: inside it, backward passes accumulate gradients locally without communication
  /// (gradient accumulation). The first backward after the scope synchronises the sum of all
  /// accumulated gradients, weighted by the sum of all prepare_for_backward() sample counts.
  class NoSync {
   public:
    NoSync(NoSync&& other) noexcept;
    NoSync& operator=(NoSync&&) = delete;
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    ~NoSync();

   private:
    friend class DistributedDataParallel;
    explicit NoSync(DistributedDataParallel* owner);
    DistributedDataParallel* owner_;
  };
  NoSync no_sync();

  /// Scales every gradient so that their global L2 norm is at most max_norm. The gradients are
  /// equal on all ranks after finish_gradient_sync(): the norm is rank 0's, all-reduced so that
  /// it is identical everywhere (global_grad_norm with every gradient Replicated). In local SGD
  /// each replica clips by its own norm (not collective then). Returns the norm before clipping.
  double clip_grad_norm(double max_norm);

  /// Collective: all-gathers a 64-bit hash of every parameter's bytes; true when all are equal.
  bool verify_replicas();

  /// Call after optimizer.step(): counts steps and, with local SGD, averages parameters every
  /// average_parameters_every steps. Collective when it averages.
  void after_optimizer_step();

  struct Stats {
    double seconds_communicating_exposed = 0;  ///< time finish_gradient_sync() spent waiting
    double seconds_in_backward = 0;            ///< prepare_for_backward() to the last gradient hook
    std::int64_t steps = 0;                    ///< after_optimizer_step() calls
    std::int64_t bytes_reduced = 0;            ///< bytes this rank passed to gradient all-reduces
    std::int64_t buckets_launched_in_backward = 0;  ///< all-reduces started from a hook
  };
  Stats stats() const;

  /// Parameter indices (module().parameters() order) per bucket, in launch order.
  std::vector<std::vector<std::size_t>> bucket_assignment() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus::train
