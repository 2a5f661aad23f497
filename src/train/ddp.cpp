// DistributedDataParallel: construction (initial broadcast, bucket layout) and the per-step
// protocol (prepare_for_backward, no_sync, finish_gradient_sync, after_optimizer_step).
#include "ddp_impl.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace chorus::train {

namespace {

/// `count` zeros of `type` in comm's shared memory (collective), freed when the tensor goes;
/// in ordinary memory when the host's shared memory cannot hold them (a small /dev/shm): that
/// failure reaches every rank alike (alloc_shared agrees on it), so all fall back together.
torch::Tensor shared_zeros(chorus::Communicator comm, std::int64_t count, torch::ScalarType type) {
  const std::size_t bytes = static_cast<std::size_t>(count) * c10::elementSize(type);
  void* data = nullptr;
  try {
    data = comm.alloc_shared(bytes);
  } catch (const Error& e) {
    if (e.status() != Status::SystemError) throw;
  }
  if (!data) return torch::zeros({count}, type);
  std::memset(data, 0, bytes);
  return torch::from_blob(
      data, {count},
      [comm](void* p) mutable {
        try {
          comm.free_shared(p);
        } catch (const std::exception&) {
          // Only a pointer alloc_shared did not return throws; this one it did.
        }
      },
      type);
}

}  // namespace

chorus::DataType chorus_dtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat:
      return DataType::Float32;
    case torch::kDouble:
      return DataType::Float64;
    case torch::kHalf:
      return DataType::Float16;
    case torch::kBFloat16:
      return DataType::Bfloat16;
    case torch::kLong:
      return DataType::Int64;
    case torch::kInt:
      return DataType::Int32;
    case torch::kChar:
      return DataType::Int8;
    case torch::kByte:
    case torch::kBool:
      return DataType::Uint8;
    default:
      throw Error(
          Status::InvalidArgument,
          std::string("DistributedDataParallel: unsupported tensor dtype ") + c10::toString(type));
  }
}

DistributedDataParallel::Impl::Impl(std::shared_ptr<torch::nn::Module> m, chorus::Communicator c,
                                    DdpOptions o)
    : module(std::move(m)), comm(std::move(c)), options(o) {
  require_argument(module != nullptr, "DistributedDataParallel: module is null");
  require_argument(static_cast<bool>(comm), "DistributedDataParallel: communicator is empty");
  require_argument(options.average_parameters_every >= 0,
                   "DistributedDataParallel: average_parameters_every must be >= 0");
  params = module->parameters();
  buffers = module->buffers();
  // Every replica starts from rank 0's parameters and buffers.
  std::vector<torch::Tensor> all = params;
  all.insert(all.end(), buffers.begin(), buffers.end());
  broadcast_tensors(all);

  // Buckets hold the parameters that require a gradient; the layout is a pure function of their
  // sizes, so it is identical on every rank.
  std::vector<std::size_t> trained;
  std::vector<std::size_t> bytes;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad()) continue;
    require_argument(params[i].scalar_type() == torch::kFloat && params[i].device().is_cpu(),
                     "DistributedDataParallel: trained parameters must be fp32 CPU tensors");
    trained.push_back(i);
    bytes.push_back(static_cast<std::size_t>(params[i].numel()) * sizeof(float));
  }
  bucket_of.assign(params.size(), std::numeric_limits<std::size_t>::max());
  slot_of.assign(params.size(), 0);
  for (const auto& members :
       assign_buckets(bytes, options.first_bucket_bytes, options.bucket_cap_bytes)) {
    Bucket bucket;
    std::int64_t total = 0;
    for (std::size_t k : members) {
      const std::size_t p = trained[k];
      bucket_of[p] = buckets.size();
      slot_of[p] = bucket.params.size();
      bucket.params.push_back(p);
      bucket.offsets.push_back(total);
      total += params[p].numel();
    }
    // The buffer that is all-reduced lives in shared memory (shared_buckets), so that its
    // all-reduces run in the peers' buffers (shm_window; half types accumulate in fp32 there).
    auto zeros = [&](torch::ScalarType type) {
      return options.shared_buckets ? shared_zeros(comm, total, type) : torch::zeros({total}, type);
    };
    if (options.compression == GradCompression::Fp16) bucket.wire = zeros(torch::kHalf);
    if (options.compression == GradCompression::Bf16) bucket.wire = zeros(torch::kBFloat16);
    bucket.flat =
        bucket.wire.defined() ? torch::zeros({total}, torch::kFloat) : zeros(torch::kFloat);
    buckets.push_back(std::move(bucket));
  }
  ready.assign(params.size(), 0);
  install_hooks();
}

DistributedDataParallel::Impl::~Impl() {
  remove_hooks();
  // A step abandoned between prepare and finish still has operations writing into our buffers.
  if (active && samples_request.valid()) {
    try {
      samples_request.wait();
    } catch (const std::exception&) {
      // Abandoned step: the caller already has (or will get) the communicator's error.
    }
  }
  wait_launched_quietly();
}

void DistributedDataParallel::Impl::broadcast_tensors(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<chorus::Request> requests;
  for (const auto& t : tensors) {
    if (t.numel() == 0) continue;
    require_argument(
        t.is_contiguous() && t.device().is_cpu(),
        "DistributedDataParallel: parameters and buffers must be contiguous CPU tensors");
    void* data = t.data_ptr();
    requests.push_back(comm.ibroadcast(data, data, static_cast<std::size_t>(t.numel()),
                                       chorus_dtype(t.scalar_type()), 0));
  }
  for (auto& r : requests) r.wait();
}

// Gradient accumulation keeps param.grad in units of 1/last_micro: before a micro-batch of `to`
// samples, grad (= S / from, S = sum over earlier micro-batches of n_m * g_m) is rescaled to
// S / to, so that after its backward grad = (S + to * g) / to. The sync step then multiplies by
// to / N (N = all ranks' samples), giving the sample-weighted mean over every micro-batch.
void DistributedDataParallel::Impl::rescale_accumulated(std::int64_t from, std::int64_t to) {
  if (from <= 0 || to <= 0 || from == to) return;
  torch::NoGradGuard no_grad;
  const double factor = static_cast<double>(from) / static_cast<double>(to);
  for (auto& p : params) {
    if (p.grad().defined()) p.mutable_grad().mul_(factor);
  }
}

void DistributedDataParallel::Impl::prepare(std::int64_t local_samples) {
  require_argument(local_samples >= 0, "prepare_for_backward: local_samples must be >= 0");
  std::lock_guard lock(mutex);
  if (active) {
    throw Error(Status::InvalidUsage,
                "prepare_for_backward called twice without finish_gradient_sync in between");
  }
  rescale_accumulated(last_micro, local_samples);
  if (local_samples > 0) last_micro = local_samples;
  if (no_sync_depth > 0 || local_sgd()) {
    accum_samples += local_samples;
    if (local_sgd()) active = true;
    return;
  }
  if (options.broadcast_buffers && !buffers.empty()) broadcast_tensors(buffers);
  unit = last_micro;
  samples[0] = static_cast<double>(accum_samples + local_samples);
  samples[1] = static_cast<double>(unit);
  samples[2] = samples[1] * samples[1];
  samples_request = comm.iall_reduce(samples, samples, 3, DataType::Float64, ReduceOp::Sum);
  have_scale = false;
  std::fill(ready.begin(), ready.end(), 0);
  for (auto& b : buckets) {
    b.pending = b.params.size();
    b.unscaled.clear();
    b.launched = false;
  }
  next_launch = 0;
  ready_twice = false;
  any_hook = false;
  prepared_at = Clock::now();
  active = true;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                 chorus::Communicator comm, DdpOptions options)
    : impl_(std::make_unique<Impl>(std::move(module), std::move(comm), options)) {}

DistributedDataParallel::~DistributedDataParallel() = default;

torch::nn::Module& DistributedDataParallel::module() { return *impl_->module; }

const chorus::Communicator& DistributedDataParallel::communicator() const { return impl_->comm; }

void DistributedDataParallel::prepare_for_backward(std::int64_t local_samples) {
  impl_->prepare(local_samples);
}

void DistributedDataParallel::finish_gradient_sync() { impl_->finish(); }

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel* owner) : owner_(owner) {
  std::lock_guard lock(owner_->impl_->mutex);
  ++owner_->impl_->no_sync_depth;
}

DistributedDataParallel::NoSync::NoSync(NoSync&& other) noexcept : owner_(other.owner_) {
  other.owner_ = nullptr;
}

DistributedDataParallel::NoSync::~NoSync() {
  if (owner_ == nullptr) return;
  std::lock_guard lock(owner_->impl_->mutex);
  --owner_->impl_->no_sync_depth;
}

DistributedDataParallel::NoSync DistributedDataParallel::no_sync() { return NoSync(this); }

double DistributedDataParallel::clip_grad_norm(double max_norm) {
  return impl_->clip_grad_norm(max_norm);
}

bool DistributedDataParallel::verify_replicas() { return impl_->verify_replicas(); }

void DistributedDataParallel::after_optimizer_step() {
  std::int64_t steps = 0;
  {
    std::lock_guard lock(impl_->mutex);
    steps = ++impl_->stats.steps;
  }
  if (impl_->local_sgd() && steps % impl_->options.average_parameters_every == 0) {
    impl_->average_parameters();
  }
}

DistributedDataParallel::Stats DistributedDataParallel::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_assignment() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : impl_->buckets) out.push_back(b.params);
  return out;
}

}  // namespace chorus::train
