// DistributedDataParallel's reduction: post-accumulation hooks mark parameters ready, buckets are
// all-reduced in launch order as soon as they are full, finish waits and writes the averages
// back. Also global-norm clipping, replica verification and local-SGD parameter averaging.
#include "ddp_impl.hpp"

#include <chorus/error.hpp>

#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace chorus::train {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// 64-bit hash of a tensor's bytes: 8-byte words mixed FNV-style, then a final avalanche.
std::uint64_t hash_bytes(const torch::Tensor& t, std::uint64_t h) {
  const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
  const std::size_t n = static_cast<std::size_t>(t.numel()) * t.element_size();
  constexpr std::uint64_t kPrime = 0x100000001b3ULL;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    h = (h ^ word) * kPrime;
  }
  for (; i < n; ++i) h = (h ^ bytes[i]) * kPrime;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

}  // namespace

void DistributedDataParallel::Impl::install_hooks() {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (bucket_of[i] == std::numeric_limits<std::size_t>::max()) continue;
    // The parameter holds its accumulator weakly: keep it alive so the hook survives.
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    auto hook = std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          on_grad_ready(i);
          return outputs;
        });
    hook_keys.push_back(acc->add_post_hook(std::move(hook)));
    accumulators.push_back(std::move(acc));
  }
}

void DistributedDataParallel::Impl::remove_hooks() {
  for (std::size_t k = 0; k < accumulators.size(); ++k)
    accumulators[k]->del_post_hook(hook_keys[k]);
  accumulators.clear();
  hook_keys.clear();
}

// The all-reduced sample total is issued in prepare; it arrives once every rank has called
// prepare, i.e. finished its forward pass. Hooks never wait for it (a rank whose peer is
// still in its forward pass would stall its own backward: a synchronisation point in the
// middle of the step); they ask scale_known() and leave gradients unscaled until it is.
// launch() and finish() wait. Every rank's scale is
// unit / total; it is 1 / ranks on all of them exactly when all units are equal (ranks * the
// sum of squares equals the square of the sum) and the total is their sum (no rank adds
// earlier micro-batches or lacks samples), which every rank decides from the same sums.
double DistributedDataParallel::Impl::grad_scale() {
  if (!have_scale) {
    samples_request.wait();
    scale = samples[0] > 0 ? static_cast<double>(unit) / samples[0] : 0.0;
    uniform = samples[0] > 0 && samples[0] == samples[1] &&
              samples[1] * samples[1] == comm.size() * samples[2];
    have_scale = true;
  }
  return scale;
}

bool DistributedDataParallel::Impl::scale_known() {
  if (!have_scale && samples_request.test()) grad_scale();
  return have_scale;
}

void DistributedDataParallel::Impl::on_grad_ready(std::size_t param) {
  std::lock_guard lock(mutex);
  if (!active || no_sync_depth > 0 || local_sgd()) return;
  if (ready[param]) {
    ready_twice = true;
    return;
  }
  ready[param] = 1;
  any_hook = true;
  last_hook_at = Clock::now();
  Bucket& bucket = buckets[bucket_of[param]];
  const std::size_t slot = slot_of[param];
  const torch::Tensor& grad = params[param].grad();
  const bool known = scale_known();
  const bool aliases = grad.defined() && grad.is_contiguous() &&
                       grad.data_ptr() == bucket.flat.data_ptr<float>() + bucket.offsets[slot];
  --bucket.pending;
  // The Avg all-reduce scales (uniform), or launch() does once the scale is known: the
  // gradient goes in as it is. Already in place (grad aliases its bucket slice, see
  // complete), there is then nothing to do, not even a tensor to make.
  const bool scaled_later = !known || uniform;
  if (!known && grad.defined()) bucket.unscaled.push_back(slot);
  if (!(aliases && scaled_later)) {
    torch::NoGradGuard no_grad;
    auto dst = bucket.flat.narrow(0, bucket.offsets[slot], params[param].numel());
    if (!grad.defined()) {
      dst.zero_();
    } else if (scaled_later) {
      dst.copy_(grad.reshape(-1));
    } else if (aliases) {
      dst.mul_(scale);  // scale in place
    } else {
      // One pass: dst = grad * (unit / total samples), the locally pre-scaled contribution.
      torch::mul_out(dst, grad.reshape(-1), torch::scalar_tensor(scale, torch::kFloat));
    }
  }
  launch_ready_buckets(true);
}

// Buckets start strictly in launch order (the communicator completes in issue order and every
// rank must issue the same sequence); a bucket readied early waits for its predecessors, and
// in a hook for the step's scale (a later hook or finish() launches it then). Without
// DdpOptions::overlap_backward only finish() launches them.
void DistributedDataParallel::Impl::launch_ready_buckets(bool from_hook) {
  if (from_hook && (!options.overlap_backward || !scale_known())) return;
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    launch(buckets[next_launch]);
    if (from_hook) ++stats.buckets_launched_in_backward;
    ++next_launch;
  }
}

void DistributedDataParallel::Impl::launch(Bucket& bucket) {
  const auto count = static_cast<std::size_t>(bucket.flat.numel());
  grad_scale();  // decides `uniform`; finish may launch a bucket no hook touched
  if (!uniform) {
    torch::NoGradGuard no_grad;
    for (std::size_t k : bucket.unscaled) {
      bucket.flat.narrow(0, bucket.offsets[k], params[bucket.params[k]].numel()).mul_(scale);
    }
  }
  bucket.unscaled.clear();
  const ReduceOp op = uniform ? ReduceOp::Avg : ReduceOp::Sum;
  if (bucket.wire.defined()) {
    bucket.wire.copy_(bucket.flat);  // fp32 -> fp16/bf16; Chorus sums half types in fp32
    void* data = bucket.wire.data_ptr();
    bucket.request =
        comm.iall_reduce(data, data, count, chorus_dtype(bucket.wire.scalar_type()), op);
    stats.bytes_reduced += static_cast<std::int64_t>(count * bucket.wire.element_size());
  } else {
    void* data = bucket.flat.data_ptr();
    bucket.request = comm.iall_reduce(data, data, count, DataType::Float32, op);
    stats.bytes_reduced += static_cast<std::int64_t>(count * sizeof(float));
  }
  bucket.launched = true;
}

void DistributedDataParallel::Impl::wait_launched_quietly() {
  for (auto& b : buckets) {
    if (!b.launched) continue;
    try {
      b.request.wait();
    } catch (const std::exception&) {
      // The step is being abandoned; the error already reached (or will reach) the caller.
    }
    b.launched = false;
  }
}

// Parameters no hook marked ready: zeros when allowed (find_unused_parameters, or a rank with no
// samples in the step); otherwise the step is abandoned with an error naming them.
void DistributedDataParallel::Impl::fill_missing_gradients() {
  std::string missing;
  std::size_t count = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (bucket_of[i] == std::numeric_limits<std::size_t>::max() || ready[i]) continue;
    if (++count <= 5) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  }
  if (count == 0) return;
  if (!options.find_unused_parameters && unit > 0) {
    active = false;
    wait_launched_quietly();
    throw Error(Status::InvalidArgument,
                "finish_gradient_sync: " + std::to_string(count) +
                    " parameter(s) received no gradient in this step (indices " + missing +
                    (count > 5 ? ", ..." : "") + "); set DdpOptions::find_unused_parameters");
  }
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (bucket_of[i] == std::numeric_limits<std::size_t>::max() || ready[i]) continue;
    ready[i] = 1;
    Bucket& bucket = buckets[bucket_of[i]];
    bucket.flat.narrow(0, bucket.offsets[slot_of[i]], params[i].numel()).zero_();
    --bucket.pending;
  }
}

void DistributedDataParallel::Impl::complete(Bucket& bucket) {
  bucket.request.wait();
  bucket.launched = false;
  torch::NoGradGuard no_grad;
  if (bucket.wire.defined()) bucket.flat.copy_(bucket.wire);
  // Without compression the averaged gradients are handed over in place: each param.grad then
  // aliases its slice of the bucket (no copy back): autograd then accumulates the next backward
  // into them in place, and the hook finds them already in the bucket. A user who replaces or frees
  // param.grad (zero_grad(set_to_none)) just gets a copy-in at the next hook.
  const bool views = !bucket.wire.defined();
  for (std::size_t k = 0; k < bucket.params.size(); ++k) {
    torch::Tensor& p = params[bucket.params[k]];
    float* slot = bucket.flat.data_ptr<float>() + bucket.offsets[k];
    if (views && p.grad().defined() && p.grad().data_ptr() == slot && p.grad().is_contiguous() &&
        p.grad().sizes() == p.sizes()) {
      continue;  // still the alias handed over last step (the usual case): nothing to do
    }
    auto src = bucket.flat.narrow(0, bucket.offsets[k], p.numel()).view(p.sizes());
    if (views) {
      // Shares the bucket's storage without being an autograd view, so optimizers may still
      // detach_() and zero_() it (libtorch's zero_grad does).
      torch::Tensor alias = torch::empty({0}, bucket.flat.options());
      alias.set_(bucket.flat.storage(), bucket.flat.storage_offset() + bucket.offsets[k], p.sizes(),
                 src.strides());
      p.mutable_grad() = alias;
    } else if (p.grad().defined()) {
      p.mutable_grad().copy_(src);
    } else {
      p.mutable_grad() = src.clone();
    }
  }
}

void DistributedDataParallel::Impl::finish() {
  std::lock_guard lock(mutex);
  if (local_sgd()) {
    active = false;
    accum_samples = last_micro = 0;
    return;
  }
  if (!active) {
    throw Error(Status::InvalidUsage, "finish_gradient_sync without prepare_for_backward");
  }
  grad_scale();  // the sample all-reduce must be complete before any exit from the step
  if (ready_twice) {
    active = false;
    wait_launched_quietly();
    throw Error(Status::InvalidUsage,
                "finish_gradient_sync: a parameter was marked ready twice in one step "
                "(two backward passes after one prepare_for_backward?)");
  }
  const auto started = Clock::now();
  fill_missing_gradients();
  launch_ready_buckets(false);
  for (auto& b : buckets) complete(b);
  const auto done = Clock::now();
  stats.seconds_communicating_exposed += seconds_between(started, done);
  if (any_hook) stats.seconds_in_backward += seconds_between(prepared_at, last_hook_at);
  active = false;
  accum_samples = last_micro = 0;
}

double DistributedDataParallel::Impl::clip_grad_norm(double max_norm) {
  require_argument(max_norm > 0, "clip_grad_norm: max_norm must be positive");
  torch::NoGradGuard no_grad;
  double sq = 0;
  for (auto& p : params) {
    if (p.grad().defined()) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  }
  // After synchronisation every rank holds the same gradients: the mean of the ranks' squared
  // norms is that norm squared, and all ranks compute the identical value from the all-reduce.
  comm.all_reduce(&sq, &sq, 1, DataType::Float64, ReduceOp::Sum);
  const double norm = std::sqrt(sq / comm.size());
  const double coef = max_norm / (norm + 1e-6);  // PyTorch's clip_grad_norm_ rule
  if (coef < 1.0) {
    for (auto& p : params) {
      if (p.grad().defined()) p.mutable_grad().mul_(coef);
    }
  }
  return norm;
}

bool DistributedDataParallel::Impl::verify_replicas() {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& p : params) h = hash_bytes(p.detach().contiguous(), h);
  for (const auto& b : buffers) h = hash_bytes(b.detach().contiguous(), h);
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.all_gather(&h, all.data(), 1, DataType::Uint64);
  for (auto v : all) {
    if (v != all[0]) return false;
  }
  return true;
}

void DistributedDataParallel::Impl::average_parameters() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& p : params) flat_parts.push_back(p.detach().reshape(-1).to(torch::kFloat));
  if (flat_parts.empty()) return;
  auto flat = torch::cat(flat_parts);
  comm.all_reduce(flat.data_ptr(), flat.data_ptr(), static_cast<std::size_t>(flat.numel()),
                  DataType::Float32, ReduceOp::Avg);
  std::int64_t offset = 0;
  for (auto& p : params) {
    p.detach().copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

}  // namespace chorus::train
