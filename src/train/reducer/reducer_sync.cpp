// GradientReducer's reduction: readiness (hooks and mark_ready) fills the buckets, buckets are
// all-reduced in launch order as soon as they are full, finish waits and hands the results to
// param.grad().
#include "reducer_impl.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>

#include <ATen/ATen.h>

#include <string>

namespace chorus::train {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Where element `offset` of `flat` lives.
const void* element_address(const at::Tensor& flat, std::int64_t offset) {
  return static_cast<const char*>(flat.data_ptr()) + offset * flat.element_size();
}

}  // namespace

chorus::Request GradientReducer::Impl::all_reduce(void* data, std::size_t count,
                                                  at::ScalarType type, ReduceOp op) {
  if (group.size() == 1) return {};
  const DataType dtype = detail::chorus_dtype(type, "GradientReducer");
  group.record(CollectiveKind::AllReduce, count * c10::elementSize(type));
  return group.comm.iall_reduce(data, data, count, dtype, op);
}

// A weighted step's sums are all-reduced from begin; they arrive once every rank has begun the
// step, i.e. finished its forward pass. Readiness never waits for them (a rank whose peer is
// still in its forward pass would stall its own backward: a synchronisation point in the
// middle of the step); it asks scale_known() and leaves gradients unscaled until it is.
// launch() and finish() wait. Every rank's scale is weight / total samples; it is 1 / ranks on
// all of them exactly when all weights are equal (ranks * the sum of squares equals the square
// of the sum) and the total is their sum, which every rank decides from the same sums.
double GradientReducer::Impl::grad_scale() {
  if (!have_scale) {
    if (sums_request.valid()) sums_request.wait();
    scale = sums[0] > 0 ? weight / sums[0] : 0.0;
    uniform = sums[0] > 0 && sums[0] == sums[1] && sums[1] * sums[1] == group.size() * sums[2];
    have_scale = true;
  }
  return scale;
}

bool GradientReducer::Impl::scale_known() {
  if (!have_scale && (!sums_request.valid() || sums_request.test())) grad_scale();
  return have_scale;
}

void GradientReducer::Impl::ready(std::size_t param, bool from_hook) {
  require_argument(bucket_of[param] != kNone, "GradientReducer::mark_ready: parameter " +
                                                  std::to_string(param) +
                                                  " does not require a gradient");
  std::lock_guard lock(mutex);
  if (!active) {
    if (from_hook) return;  // a backward outside a step (an accumulation micro-batch)
    throw Error(Status::InvalidUsage, "GradientReducer::mark_ready: parameter " +
                                          std::to_string(param) +
                                          " marked ready outside a step (begin_step first)");
  }
  if (readied[param]) {
    if (!from_hook) {
      throw Error(Status::InvalidUsage, "GradientReducer::mark_ready: parameter " +
                                            std::to_string(param) +
                                            " was already marked ready in this step");
    }
    readied_twice = param;  // reported by finish(): a hook cannot throw into backward
    return;
  }
  readied[param] = 1;
  any_ready = true;
  last_ready_at = Clock::now();
  Bucket& bucket = buckets[bucket_of[param]];
  const std::size_t slot = slot_of[param];
  const at::Tensor& grad = params[param].grad();
  const bool known = scale_known();
  const bool aliases = grad.defined() && grad.is_contiguous() &&
                       grad.data_ptr() == element_address(flat_of(bucket), bucket.offsets[slot]);
  --bucket.pending;
  // The Avg all-reduce scales (uniform), or launch() does once the scale is known: the
  // gradient goes in as it is. Already in place (grad aliases its bucket slice, see
  // complete), there is then nothing to do, not even a tensor to make.
  const bool scaled_later = !known || uniform;
  if (!known && grad.defined()) bucket.unscaled.push_back(slot);
  if (!(aliases && scaled_later)) {
    at::NoGradGuard no_grad;
    auto dst = bucket.flat.narrow(0, bucket.offsets[slot], params[param].numel());
    if (!grad.defined()) {
      dst.zero_();
    } else if (scaled_later) {
      dst.copy_(grad.reshape(-1));
    } else if (aliases) {
      dst.mul_(scale);  // scale in place
    } else {
      // One pass: dst = grad * scale, the locally pre-scaled contribution.
      const auto type = dst.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
      at::mul_out(dst, grad.reshape(-1), at::scalar_tensor(scale, at::TensorOptions(type)));
    }
  }
  // Release: the bucket holds the only copy; the full-size param.grad goes now.
  if (options.sharding == GradSharding::Release) params[param].mutable_grad() = at::Tensor();
  launch_ready_buckets(true);
  if (options.sharding == GradSharding::Release) release_scattered();
}

at::Tensor& GradientReducer::Impl::flat_of(Bucket& bucket) {
  if (!bucket.flat.defined()) {
    bucket.flat = at::zeros({bucket.padded_numel}, at::TensorOptions().dtype(bucket.type));
  }
  return bucket.flat;
}

void GradientReducer::Impl::release_scattered() {
  for (std::size_t b = 0; b < next_launch; ++b) {
    Bucket& bucket = buckets[b];
    if (!bucket.flat.defined() || !bucket.launched) continue;
    if (!bucket.request.valid() || bucket.request.test()) bucket.flat = at::Tensor();
  }
}

chorus::Request GradientReducer::Impl::reduce_scatter(Bucket& bucket, ReduceOp op) {
  const auto chunk = static_cast<std::size_t>(bucket.shard.numel());
  if (group.size() == 1) {
    if (!bucket.shard.is_alias_of(bucket.flat)) bucket.shard.copy_(bucket.flat);
    return {};
  }
  const DataType dtype = detail::chorus_dtype(bucket.type, "GradientReducer");
  group.record(CollectiveKind::ReduceScatter, bucket.flat.numel() * bucket.flat.element_size());
  // Keep: the shard is block rank of the bucket (an in-place reduce-scatter).
  return group.comm.ireduce_scatter(bucket.flat.data_ptr(), bucket.shard.data_ptr(), chunk, dtype,
                                    op);
}

// Buckets start strictly in launch order (the communicator completes in issue order and every
// rank must issue the same sequence); a bucket readied early waits for its predecessors, and
// before the step's scale is known (a later mark, or finish(), launches it then). Without
// overlap_backward only finish() launches them.
void GradientReducer::Impl::launch_ready_buckets(bool early) {
  if (early && (!options.overlap_backward || !scale_known())) return;
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    launch(buckets[next_launch]);
    if (early) ++stats.buckets_launched_early;
    ++next_launch;
  }
}

void GradientReducer::Impl::launch(Bucket& bucket) {
  const auto count = static_cast<std::size_t>(flat_of(bucket).numel());
  grad_scale();  // decides `uniform`; finish may launch a bucket nothing readied early
  if (!uniform) {
    at::NoGradGuard no_grad;
    for (std::size_t k : bucket.unscaled) {
      bucket.flat.narrow(0, bucket.offsets[k], params[bucket.params[k]].numel()).mul_(scale);
    }
  }
  bucket.unscaled.clear();
  if (sharded()) {
    bucket.request = reduce_scatter(bucket, uniform ? ReduceOp::Avg : ReduceOp::Sum);
    if (bucket.request.valid()) {
      stats.bytes_reduced +=
          bucket.padded_numel * static_cast<std::int64_t>(c10::elementSize(bucket.type));
    }
    bucket.launched = true;
    return;
  }
  // Half types travel as they are; Chorus sums them in fp32.
  if (bucket.wire.defined()) bucket.wire.copy_(bucket.flat);
  at::Tensor& sent = bucket.wire.defined() ? bucket.wire : bucket.flat;
  bucket.request = all_reduce(sent.data_ptr(), count, sent.scalar_type(),
                              uniform ? ReduceOp::Avg : ReduceOp::Sum);
  if (bucket.request.valid()) {
    stats.bytes_reduced += static_cast<std::int64_t>(count * sent.element_size());
  }
  bucket.launched = true;
}

void GradientReducer::Impl::wait_launched_quietly() {
  for (auto& b : buckets) {
    if (!b.launched) continue;
    try {
      if (b.request.valid()) b.request.wait();
    } catch (const std::exception&) {
      // The step is being abandoned; the error already reached (or will reach) the caller.
    }
    b.launched = false;
  }
}

// Parameters not marked ready get zeros in their slots, so that their buckets can still be
// all-reduced (the rank's peers are waiting in them). That is the step's result when allowed
// (zero_missing, or a weight of 0: all the rank's contributions are zero anyway); otherwise the
// sentence returned names them and finish() throws it once the buckets are done.
std::string GradientReducer::Impl::zero_missing_gradients() {
  std::string missing;
  std::size_t count = 0;
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (bucket_of[i] == kNone || readied[i]) continue;
    if (++count <= 5) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    readied[i] = 1;
    Bucket& bucket = buckets[bucket_of[i]];
    flat_of(bucket).narrow(0, bucket.offsets[slot_of[i]], params[i].numel()).zero_();
    --bucket.pending;
  }
  if (count == 0 || options.zero_missing || weight == 0) return "";
  return "GradientReducer: " + std::to_string(count) +
         " parameter(s) received no gradient in this step (indices " + missing +
         (count > 5 ? ", ..." : "") +
         "); mark them ready, or reduce them as zeros (ReducerOptions::zero_missing, "
         "DdpOptions::find_unused_parameters)";
}

void GradientReducer::Impl::complete(Bucket& bucket) {
  if (bucket.request.valid()) bucket.request.wait();
  bucket.launched = false;
  at::NoGradGuard no_grad;
  if (options.sharding == GradSharding::Release) {
    bucket.flat = at::Tensor();
    return;
  }
  if (bucket.wire.defined()) bucket.flat.copy_(bucket.wire);
  // Without compression the results are handed over in place: each param.grad then aliases
  // its slice of the bucket (no copy back): autograd then accumulates the next backward into
  // them in place, and readiness finds them already in the bucket. A user who replaces or
  // frees param.grad (zero_grad(set_to_none)) just gets a copy-in at the next readiness.
  const bool views = !bucket.wire.defined();
  for (std::size_t k = 0; k < bucket.params.size(); ++k) {
    at::Tensor& p = params[bucket.params[k]];
    const at::Tensor& grad = p.grad();
    if (views && grad.defined() &&
        grad.data_ptr() == element_address(bucket.flat, bucket.offsets[k]) &&
        grad.is_contiguous() && grad.sizes() == p.sizes()) {
      continue;  // still the alias handed over last step (the usual case): nothing to do
    }
    auto src = bucket.flat.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes());
    if (views) {
      // Shares the bucket's storage without being an autograd view, so optimizers may still
      // detach_() and zero_() it (libtorch's zero_grad does).
      at::Tensor alias = at::empty({0}, bucket.flat.options());
      alias.set_(bucket.flat.storage(), bucket.flat.storage_offset() + bucket.offsets[k], p.sizes(),
                 src.strides());
      p.mutable_grad() = alias;
    } else if (grad.defined()) {
      p.mutable_grad().copy_(src);
    } else {
      p.mutable_grad() = src.clone();
    }
  }
}

void GradientReducer::Impl::finish() {
  std::lock_guard lock(mutex);
  if (!active) {
    throw Error(Status::InvalidUsage, "GradientReducer::finish_step: no step is active");
  }
  active = false;  // the step ends here, whatever happens below
  grad_scale();    // the sums' all-reduce must be complete before any exit from the step
  const auto started = Clock::now();
  const std::string missing = zero_missing_gradients();
  launch_ready_buckets(false);
  if (!missing.empty() || readied_twice != kNone) {
    wait_launched_quietly();
    if (!missing.empty()) throw Error(Status::InvalidArgument, missing);
    throw Error(Status::InvalidUsage,
                "GradientReducer: parameter " + std::to_string(readied_twice) +
                    " was marked ready twice in one step (two backward passes in one step?)");
  }
  for (auto& b : buckets) complete(b);
  stats.seconds_waiting += seconds_between(started, Clock::now());
  if (any_ready) stats.seconds_to_last_ready += seconds_between(begun_at, last_ready_at);
}

}  // namespace chorus::train
