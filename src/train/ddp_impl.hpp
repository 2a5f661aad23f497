// Internal state of DistributedDataParallel, shared by ddp.cpp (construction, step protocol)
// and ddp_sync.cpp (gradient hooks, bucket reduction, clipping, replica checks, local SGD).
// Includes torch: only those two files may include it.
#pragma once

#include <chorus/train/ddp.hpp>

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace chorus::train {

/// One flat fp32 gradient bucket. After a synchronised step each param.grad aliases its slice of
/// the bucket (like PyTorch's gradient_as_bucket_view, but through shared storage rather than an
/// autograd view, so optimizers may detach_() it), so the averaged gradients are never copied
/// back and the next backward accumulates straight into the bucket; the hook then only scales
/// in place. A param.grad that does not (or no longer) alias the bucket — the first step,
/// zero_grad(set_to_none), a user's replacement, compression — is copied in, pre-scaled, in the
/// same single pass.
struct Bucket {
  std::vector<std::size_t> params;    ///< indices into Impl::params, in launch order
  std::vector<std::int64_t> offsets;  ///< element offset of params[k] inside flat
  torch::Tensor flat;                 ///< fp32, sum of the parameters' numel elements
  torch::Tensor wire;                 ///< fp16/bf16 copy all-reduced when compressing
  std::size_t pending = 0;            ///< parameters not yet ready in this step
  /// Slots whose gradient is in the bucket unscaled: readied before the step's scale was
  /// known (launch scales them when the step turns out not to be uniform).
  std::vector<std::size_t> unscaled;
  bool launched = false;
  chorus::Request request;
};

struct DistributedDataParallel::Impl {
  using Clock = std::chrono::steady_clock;

  Impl(std::shared_ptr<torch::nn::Module> m, chorus::Communicator c, DdpOptions o);
  ~Impl();

  // Step protocol (ddp.cpp).
  void prepare(std::int64_t local_samples);
  void rescale_accumulated(std::int64_t from, std::int64_t to);
  void broadcast_tensors(const std::vector<torch::Tensor>& tensors);

  // Reduction (ddp_sync.cpp).
  void install_hooks();
  void remove_hooks();
  void on_grad_ready(std::size_t param);
  double grad_scale();
  bool scale_known();  ///< grad_scale() is known without waiting (the sample sum arrived)
  void launch_ready_buckets(bool from_hook);  ///< from a gradient hook, or from finish()
  void launch(Bucket& bucket);
  void finish();
  void fill_missing_gradients();
  void complete(Bucket& bucket);
  void wait_launched_quietly();
  double clip_grad_norm(double max_norm);
  bool verify_replicas();
  void average_parameters();
  bool local_sgd() const { return options.average_parameters_every > 0; }

  std::shared_ptr<torch::nn::Module> module;
  chorus::Communicator comm;
  DdpOptions options;
  std::vector<torch::Tensor> params;   ///< module->parameters() order
  std::vector<torch::Tensor> buffers;  ///< module->buffers() order
  std::vector<Bucket> buckets;         ///< in launch order
  std::vector<std::size_t> bucket_of;  ///< param -> bucket (SIZE_MAX: no grad required)
  std::vector<std::size_t> slot_of;    ///< param -> position inside its bucket
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  ///< kept alive (see docs)
  std::vector<std::uintptr_t> hook_keys;

  // State of the current step, guarded by mutex (hooks may run on autograd's thread).
  std::mutex mutex;
  bool active = false;  ///< prepare_for_backward() called, finish pending
  int no_sync_depth = 0;
  std::int64_t accum_samples = 0;  ///< samples of earlier no_sync micro-batches
  std::int64_t last_micro = 0;     ///< param.grad is in units of 1/last_micro (see prepare)
  std::int64_t unit = 0;           ///< scale of this step's gradient: unit / total samples
  /// This rank's samples in the step, unit and unit squared, then their sums over the ranks.
  double samples[3] = {0, 0, 0};
  chorus::Request samples_request;
  bool have_scale = false;
  double scale = 0;
  /// Every rank's scale is 1 / ranks (equal shares, no earlier micro-batches): gradients go
  /// unscaled into the buckets and are all-reduced with Avg, which divides them on the way.
  bool uniform = false;
  std::vector<char> ready;
  std::size_t next_launch = 0;
  bool ready_twice = false;
  Clock::time_point prepared_at{};
  Clock::time_point last_hook_at{};
  bool any_hook = false;
  Stats stats;
};

/// Chorus element type of a torch dtype; throws InvalidArgument for one Chorus cannot move.
chorus::DataType chorus_dtype(torch::ScalarType type);

}  // namespace chorus::train
