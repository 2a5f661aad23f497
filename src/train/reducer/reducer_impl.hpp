// Internal state of GradientReducer, shared by reducer.cpp (construction, step protocol) and
// reducer_sync.cpp (readiness, bucket launch and completion).
#pragma once

#include <chorus/train/reducer.hpp>

#include <torch/csrc/autograd/function.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace chorus::train {

/// One flat gradient bucket of one dtype. After a completed step each param.grad aliases its
/// slice of the bucket (like PyTorch's gradient_as_bucket_view, but through shared storage
/// rather than an autograd view, so optimizers may detach_() it), so the reduced gradients are
/// never copied back and the next backward accumulates straight into the bucket; readiness
/// then only scales in place. A param.grad that does not (or no longer) alias the bucket — the
/// first step, zero_grad(set_to_none), a user's replacement, compression — is copied in,
/// pre-scaled, in the same single pass.
struct Bucket {
  std::vector<std::size_t> params;    ///< indices into Impl::params, in launch order
  std::vector<std::int64_t> offsets;  ///< element offset of params[k] inside flat
  /// The parameters' dtype, padded_numel elements (undefined between steps when sharding
  /// with GradSharding::Release: allocated by the first readiness, freed once scattered).
  at::Tensor flat;
  std::int64_t numel = 0;         ///< elements of the parameters
  std::int64_t padded_numel = 0;  ///< numel, rounded up to a multiple of the group when sharding
  at::ScalarType type = at::kFloat;
  /// Sharding: this rank's block of the reduced bucket (Keep: an alias of flat's block).
  at::Tensor shard;
  at::Tensor wire;          ///< fp16/bf16 copy all-reduced when compressing
  std::size_t pending = 0;  ///< parameters not yet ready in this step
  /// Slots whose gradient is in the bucket unscaled: readied before the step's scale was
  /// known (launch scales them when the step turns out not to be uniform).
  std::vector<std::size_t> unscaled;
  bool launched = false;
  chorus::Request request;
};

struct GradientReducer::Impl {
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

  Impl(std::vector<at::Tensor> p, Group g, ReducerOptions o);
  ~Impl();

  // Construction and step protocol (reducer.cpp).
  void make_buckets();
  std::vector<std::vector<std::size_t>> bucket_members(const std::vector<std::size_t>& trained,
                                                       const std::vector<std::size_t>& bytes,
                                                       const std::vector<int>& kinds) const;
  void install_hooks();
  void remove_hooks();
  void begin(double weight, double samples, bool weighted);
  std::size_t index_of_tensor(const at::Tensor& param) const;

  // Readiness and reduction (reducer_sync.cpp).
  void ready(std::size_t param, bool from_hook);
  double grad_scale();
  bool scale_known();  ///< grad_scale() is known without waiting (the weights arrived)
  void launch_ready_buckets(bool early);  ///< from mark_ready / a hook, or from finish()
  void launch(Bucket& bucket);
  at::Tensor& flat_of(Bucket& bucket);  ///< bucket.flat, allocated (zeros) when it is not
  bool sharded() const { return options.sharding != GradSharding::None; }
  /// GradSharding::Release: frees the full buffers of buckets whose reduce-scatter is done.
  void release_scattered();
  void finish();
  std::string zero_missing_gradients();  ///< "" or the sentence naming the missing ones
  void complete(Bucket& bucket);
  void wait_launched_quietly();
  /// Issues an in-place all-reduce on the group and records it; nothing on a one-rank group.
  chorus::Request all_reduce(void* data, std::size_t count, at::ScalarType type, ReduceOp op);
  /// Issues the bucket's reduce-scatter into its shard and records it; on a group of one rank
  /// the shard is the bucket (copied when it is a separate tensor).
  chorus::Request reduce_scatter(Bucket& bucket, ReduceOp op);

  std::vector<at::Tensor> params;
  Group group;
  ReducerOptions options;
  std::vector<Bucket> buckets;         ///< in launch order
  std::vector<std::size_t> bucket_of;  ///< param -> bucket (kNone: no grad required)
  std::vector<std::size_t> slot_of;    ///< param -> position inside its bucket
  std::unordered_map<const void*, std::size_t> index_of;             ///< TensorImpl* -> param
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;  ///< kept alive (see .cpp)
  std::vector<std::uintptr_t> hook_keys;

  // State of the current step, guarded by mutex (hooks may run on autograd's thread).
  mutable std::mutex mutex;
  bool active = false;
  double weight = 0;  ///< this rank's weight (1 in an unweighted step)
  /// This rank's samples, weight and weight squared, then their sums over the ranks.
  double sums[3] = {0, 0, 0};
  chorus::Request sums_request;
  bool have_scale = false;
  double scale = 0;
  /// Every rank's scale is 1 / ranks: gradients go unscaled into the buckets and are
  /// all-reduced with Avg, which divides them on the way.
  bool uniform = false;
  std::vector<char> readied;
  std::size_t next_launch = 0;
  std::size_t readied_twice = kNone;  ///< a parameter a hook marked twice in this step
  Clock::time_point begun_at{};
  Clock::time_point last_ready_at{};
  bool any_ready = false;
  Stats stats;
};

}  // namespace chorus::train
