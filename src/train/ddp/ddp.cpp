// DistributedDataParallel: construction (initial broadcast, the gradient reducer) and the
// per-step protocol (prepare_for_backward, no_sync, finish_gradient_sync, after_optimizer_step).
#include "ddp_impl.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>

#include <string>

namespace chorus::train {

chorus::DataType chorus_dtype(torch::ScalarType type) {
  // Booleans are bytes to a broadcast, the only collective DDP applies to tensors of any type.
  if (type == torch::kBool) return DataType::Uint8;
  return detail::chorus_dtype(type, "DistributedDataParallel");
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
  for (const auto& p : params) {
    require_argument(
        !p.requires_grad() || (p.scalar_type() == torch::kFloat && p.device().is_cpu()),
        "DistributedDataParallel: trained parameters must be fp32 CPU tensors");
  }
  ReducerOptions r;
  r.bucket_cap_bytes = options.bucket_cap_bytes;
  r.first_bucket_bytes = options.first_bucket_bytes;
  r.compression = options.compression;
  r.shared_buckets = options.shared_buckets;
  r.overlap_backward = options.overlap_backward;
  r.zero_missing = options.find_unused_parameters;
  reducer = std::make_unique<GradientReducer>(params, Group{comm, "dp", nullptr}, r);
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
  // The reduced gradient is sum_r last_micro_r * grad_r / (all ranks' samples): grad is in
  // units of 1 / last_micro (see rescale_accumulated).
  reducer->begin_weighted_step(last_micro, accum_samples + local_samples);
  active = true;
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
  active = false;
  reducer->finish_step();
  accum_samples = last_micro = 0;
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
    steps = ++impl_->steps;
  }
  if (impl_->local_sgd() && steps % impl_->options.average_parameters_every == 0) {
    impl_->average_parameters();
  }
}

DistributedDataParallel::Stats DistributedDataParallel::stats() const {
  const GradientReducer::Stats r = impl_->reducer->stats();
  Stats s;
  s.seconds_communicating_exposed = r.seconds_waiting;
  s.seconds_in_backward = r.seconds_to_last_ready;
  s.bytes_reduced = r.bytes_reduced;
  s.buckets_launched_in_backward = r.buckets_launched_early;
  std::lock_guard lock(impl_->mutex);
  s.steps = impl_->steps;
  return s;
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_assignment() const {
  return impl_->reducer->bucket_assignment();
}

}  // namespace chorus::train
