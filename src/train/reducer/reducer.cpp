// GradientReducer: construction (bucket layout, hooks) and the step protocol (begin, finish).
#include "reducer_impl.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <string>

namespace chorus::train {

namespace {

/// The type a bucket of `type` travels in: the compression's half type for wider floats.
at::ScalarType wire_type(at::ScalarType type, GradCompression compression) {
  if (compression == GradCompression::None || c10::elementSize(type) <= 2) return type;
  return compression == GradCompression::Fp16 ? at::kHalf : at::kBFloat16;
}

}  // namespace

GradientReducer::Impl::Impl(std::vector<at::Tensor> p, Group g, ReducerOptions o)
    : params(std::move(p)), group(std::move(g)), options(o) {
  require_argument(static_cast<bool>(group.comm),
                   "GradientReducer: the group's communicator is empty");
  require_argument(options.divisor >= 0,
                   "GradientReducer: divisor " + std::to_string(options.divisor) + " is negative");
  require_argument(!sharded() || options.compression == GradCompression::None,
                   "GradientReducer: gradient compression cannot be combined with sharding "
                   "(reduce-scatter buckets travel in their own dtype)");
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& t = params[i];
    require_argument(t.defined(),
                     "GradientReducer: parameter " + std::to_string(i) + " is an undefined tensor");
    const auto [it, fresh] = index_of.emplace(t.unsafeGetTensorImpl(), i);
    require_argument(fresh, "GradientReducer: parameters " + std::to_string(it->second) + " and " +
                                std::to_string(i) + " are the same tensor");
    require_argument(
        !t.requires_grad() || (at::isFloatingType(t.scalar_type()) && t.device().is_cpu()),
        "GradientReducer: parameter " + std::to_string(i) + " is a " +
            std::string(c10::toString(t.scalar_type())) + " tensor on " + t.device().str() +
            "; trained parameters must be floating-point CPU tensors");
    require_argument(!t.requires_grad() || !options.autograd_hooks || t.is_leaf(),
                     "GradientReducer: parameter " + std::to_string(i) +
                         " is not a leaf tensor: autograd accumulates no gradient into it for "
                         "the hooks (ReducerOptions::autograd_hooks) to see");
  }
  make_buckets();
  readied.assign(params.size(), 0);
  if (options.autograd_hooks) install_hooks();
}

GradientReducer::Impl::~Impl() {
  remove_hooks();
  // A step abandoned between begin and finish still has operations writing into our buffers.
  if (active && sums_request.valid()) {
    try {
      sums_request.wait();
    } catch (const std::exception&) {
      // Abandoned step: the caller already has (or will get) the communicator's error.
    }
  }
  wait_launched_quietly();
}

// The parameter indices of each bucket: options.buckets checked, or assign_buckets() over the
// trained parameters (`trained`, with their bytes and dtypes).
std::vector<std::vector<std::size_t>> GradientReducer::Impl::bucket_members(
    const std::vector<std::size_t>& trained, const std::vector<std::size_t>& bytes,
    const std::vector<int>& kinds) const {
  std::vector<std::vector<std::size_t>> out;
  if (options.buckets.empty()) {
    for (auto members :
         assign_buckets(bytes, kinds, options.first_bucket_bytes, options.bucket_cap_bytes)) {
      for (std::size_t& k : members) k = trained[k];
      out.push_back(std::move(members));
    }
    return out;
  }
  std::vector<int> seen(params.size(), 0);
  for (std::size_t b = 0; b < options.buckets.size(); ++b) {
    const auto& members = options.buckets[b];
    const auto where = " in explicit bucket " + std::to_string(b);
    require_argument(!members.empty(),
                     "GradientReducer: explicit bucket " + std::to_string(b) + " is empty");
    for (std::size_t p : members) {
      require_argument(p < params.size(), "GradientReducer: parameter index " + std::to_string(p) +
                                              where + " is out of range (" +
                                              std::to_string(params.size()) + " parameters)");
      require_argument(params[p].requires_grad(), "GradientReducer: parameter " +
                                                      std::to_string(p) + where +
                                                      " does not require a gradient");
      require_argument(++seen[p] == 1, "GradientReducer: parameter " + std::to_string(p) +
                                           " is in more than one explicit bucket");
      require_argument(params[p].scalar_type() == params[members.front()].scalar_type(),
                       "GradientReducer: explicit bucket " + std::to_string(b) +
                           " mixes dtypes (parameters " + std::to_string(members.front()) +
                           " and " + std::to_string(p) + ")");
    }
  }
  for (std::size_t p : trained) {
    require_argument(seen[p] == 1, "GradientReducer: parameter " + std::to_string(p) +
                                       " requires a gradient but is in no explicit bucket");
  }
  return options.buckets;
}

// Buckets hold the parameters that require a gradient, one dtype each; the layout is a pure
// function of their sizes and dtypes, so it is identical on every rank.
void GradientReducer::Impl::make_buckets() {
  std::vector<std::size_t> trained;
  std::vector<std::size_t> bytes;
  std::vector<int> kinds;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad()) continue;
    trained.push_back(i);
    bytes.push_back(static_cast<std::size_t>(params[i].numel()) * params[i].element_size());
    kinds.push_back(static_cast<int>(params[i].scalar_type()));
  }
  bucket_of.assign(params.size(), kNone);
  slot_of.assign(params.size(), 0);
  for (const auto& members : bucket_members(trained, bytes, kinds)) {
    Bucket bucket;
    std::int64_t total = 0;
    for (std::size_t p : members) {
      bucket_of[p] = buckets.size();
      slot_of[p] = bucket.params.size();
      bucket.params.push_back(p);
      bucket.offsets.push_back(total);
      total += params[p].numel();
    }
    bucket.numel = total;
    bucket.type = params[bucket.params.front()].scalar_type();
    const std::int64_t d = sharded() ? group.size() : 1;
    bucket.padded_numel = (total + d - 1) / d * d;
    if (options.sharding == GradSharding::Release) {
      bucket.shard = at::zeros({bucket.padded_numel / d}, at::TensorOptions().dtype(bucket.type));
      buckets.push_back(std::move(bucket));
      continue;
    }
    // The buffer that is all-reduced lives in shared memory (shared_buckets), so that its
    // all-reduces run in the peers' buffers (shm_window; half types accumulate in fp32 there).
    auto zeros = [&](at::ScalarType t) {
      return options.shared_buckets
                 ? detail::shared_zeros(group.comm, bucket.padded_numel, t)
                 : at::zeros({bucket.padded_numel}, at::TensorOptions().dtype(t));
    };
    const at::ScalarType wire = wire_type(bucket.type, options.compression);
    if (wire != bucket.type) bucket.wire = zeros(wire);
    bucket.flat = bucket.wire.defined() ? at::zeros({total}, at::TensorOptions().dtype(bucket.type))
                                        : zeros(bucket.type);
    if (sharded()) {
      const std::int64_t chunk = bucket.padded_numel / d;
      bucket.shard = bucket.flat.narrow(0, chunk * group.rank(), chunk);
    }
    buckets.push_back(std::move(bucket));
  }
}

void GradientReducer::Impl::install_hooks() {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (bucket_of[i] == kNone) continue;
    // The parameter holds its accumulator weakly: keep it alive so the hook survives.
    auto acc = torch::autograd::impl::grad_accumulator(params[i]);
    auto hook = std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs,
                  const torch::autograd::variable_list&) {
          ready(i, true);
          return outputs;
        });
    hook_keys.push_back(acc->add_post_hook(std::move(hook)));
    accumulators.push_back(std::move(acc));
  }
}

void GradientReducer::Impl::remove_hooks() {
  for (std::size_t k = 0; k < accumulators.size(); ++k)
    accumulators[k]->del_post_hook(hook_keys[k]);
  accumulators.clear();
  hook_keys.clear();
}

// An unweighted step knows its scale at once (1 / divisor). A weighted one issues the
// all-reduce of (samples, weight, weight²) before any bucket; see grad_scale().
void GradientReducer::Impl::begin(double w, double samples, bool weighted) {
  std::lock_guard lock(mutex);
  if (active) {
    throw Error(Status::InvalidUsage,
                "GradientReducer: a step was begun twice without finish_step in between");
  }
  wait_launched_quietly();  // buckets a failed finish_step left in flight
  weight = w;
  have_scale = false;
  if (weighted) {
    sums[0] = samples;
    sums[1] = w;
    sums[2] = w * w;
    sums_request = all_reduce(sums, 3, at::kDouble, ReduceOp::Sum);
  } else {
    const std::int64_t divisor = options.divisor > 0 ? options.divisor : group.size();
    scale = 1.0 / static_cast<double>(divisor);
    uniform = divisor == group.size();
    have_scale = true;
  }
  std::fill(readied.begin(), readied.end(), 0);
  for (auto& b : buckets) {
    b.pending = b.params.size();
    b.unscaled.clear();
    b.launched = false;
  }
  next_launch = 0;
  readied_twice = kNone;
  any_ready = false;
  begun_at = Clock::now();
  active = true;
}

std::size_t GradientReducer::Impl::index_of_tensor(const at::Tensor& param) const {
  const auto it = param.defined() ? index_of.find(param.unsafeGetTensorImpl()) : index_of.end();
  require_argument(it != index_of.end(),
                   "GradientReducer::mark_ready: the tensor is not one of the reducer's " +
                       std::to_string(params.size()) + " parameters");
  return it->second;
}

GradientReducer::GradientReducer(std::vector<at::Tensor> params, Group group,
                                 ReducerOptions options)
    : impl_(std::make_unique<Impl>(std::move(params), std::move(group), options)) {}

GradientReducer::~GradientReducer() = default;

void GradientReducer::begin_step() { impl_->begin(1.0, 0.0, false); }

void GradientReducer::begin_weighted_step(std::int64_t weight, std::int64_t samples) {
  require_argument(weight >= 0 && samples >= 0, "GradientReducer::begin_weighted_step: weight " +
                                                    std::to_string(weight) + " and samples " +
                                                    std::to_string(samples) + " must be >= 0");
  impl_->begin(static_cast<double>(weight), static_cast<double>(samples), true);
}

void GradientReducer::mark_ready(std::size_t index) {
  require_argument(index < impl_->params.size(), "GradientReducer::mark_ready: parameter " +
                                                     std::to_string(index) + " of " +
                                                     std::to_string(impl_->params.size()));
  impl_->ready(index, false);
}

void GradientReducer::mark_ready(const at::Tensor& param) {
  impl_->ready(impl_->index_of_tensor(param), false);
}

void GradientReducer::finish_step() { impl_->finish(); }

bool GradientReducer::step_active() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->active;
}

const Group& GradientReducer::group() const { return impl_->group; }

const std::vector<at::Tensor>& GradientReducer::parameters() const { return impl_->params; }

std::vector<std::vector<std::size_t>> GradientReducer::bucket_assignment() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : impl_->buckets) out.push_back(b.params);
  return out;
}

std::vector<BucketLayout> GradientReducer::bucket_layouts() const {
  std::vector<BucketLayout> out;
  for (const auto& b : impl_->buckets) {
    out.push_back({b.params, b.offsets, b.numel, b.padded_numel, b.type});
  }
  return out;
}

at::Tensor GradientReducer::gradient_shard(std::size_t bucket) const {
  if (!impl_->sharded()) {
    throw Error(Status::InvalidUsage,
                "GradientReducer::gradient_shard: the reducer does not shard gradients "
                "(ReducerOptions::sharding is None)");
  }
  require_argument(bucket < impl_->buckets.size(), "GradientReducer::gradient_shard: bucket " +
                                                       std::to_string(bucket) + " of " +
                                                       std::to_string(impl_->buckets.size()));
  return impl_->buckets[bucket].shard;
}

std::int64_t GradientReducer::gradient_bytes() const {
  std::lock_guard lock(impl_->mutex);
  std::int64_t bytes = 0;
  auto size_of = [](const at::Tensor& t) {
    return t.defined() ? static_cast<std::int64_t>(t.numel() * t.element_size()) : 0;
  };
  for (const auto& b : impl_->buckets) {
    bytes += size_of(b.flat) + size_of(b.wire);
    // Keep's shard is an alias of the bucket (counted with it).
    if (b.shard.defined() && !(b.flat.defined() && b.shard.is_alias_of(b.flat))) {
      bytes += size_of(b.shard);
    }
  }
  for (std::size_t i = 0; i < impl_->params.size(); ++i) {
    const at::Tensor& grad = impl_->params[i].grad();
    if (!grad.defined()) continue;
    const std::size_t b = impl_->bucket_of[i];
    const bool in_bucket = b != Impl::kNone && impl_->buckets[b].flat.defined() &&
                           grad.is_alias_of(impl_->buckets[b].flat);
    if (!in_bucket) bytes += size_of(grad);
  }
  return bytes;
}

GradientReducer::Stats GradientReducer::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

}  // namespace chorus::train
