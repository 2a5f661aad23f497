// Zero3: construction (every check before anything changes, the shards, the parameters
// re-seated onto their units' storages) and the step protocol. See zero3.hpp.
#include "zero3_impl.hpp"

#include "../autograd/tensor_collectives.hpp"
#include "mixed_precision.hpp"
#include "shard_checks.hpp"

#include <chorus/error.hpp>

#include <c10/util/strides.h>
#include <torch/torch.h>

#include <string>
#include <unordered_map>

namespace chorus::train {
namespace {

std::string param_name(std::size_t i) { return "parameter " + std::to_string(i); }

/// A tensor of `sizes` on `storage` from element `offset` (a leaf, not an autograd view).
at::Tensor alias_on(const c10::Storage& storage, at::ScalarType type, std::int64_t offset,
                    at::IntArrayRef sizes) {
  at::Tensor alias = at::empty({0}, at::TensorOptions().dtype(type));
  alias.set_(storage, offset, sizes, c10::contiguous_strides(sizes));
  return alias;
}

}  // namespace

Zero3::Impl::Impl(std::vector<at::Tensor> p, std::vector<std::vector<std::size_t>> u, Group g,
                  const ShardOptimizerFactory& make, Zero3Options o)
    : params(std::move(p)), group(std::move(g)), options(o) {
  require_argument(static_cast<bool>(group.comm), "Zero3: the group's communicator is empty");
  check(u);
  std::vector<at::Tensor> flats = whole_units(u);
  std::vector<at::Tensor> shards;
  for (std::size_t k = 0; k < units.size(); ++k) {
    const std::int64_t chunk = units[k].layout.padded_numel / group.size();
    units[k].shard = flats[k].narrow(0, chunk * group.rank(), chunk).clone();
    if (options.mixed_precision) {
      units[k].half = units[k].shard.to(*options.mixed_precision);
      units[k].layout.type = layouts[k].type = *options.mixed_precision;
      flats[k] = flats[k].to(*options.mixed_precision);  // the values the units gather
    }
    shards.push_back(units[k].shard);
  }
  require_argument(static_cast<bool>(make), "Zero3: the optimizer factory is empty");
  optimizer = make(shards);
  require_argument(optimizer != nullptr, "Zero3: the optimizer factory returned null");
  detail::require_optimizer_over(*optimizer, shards, "Zero3", "unit shards");
  if (group.size() > 1) gather_comm = group.comm.split(0, group.rank(), "zero3_gather");
  seat(std::move(flats));
  reducer.emplace(params, group, reducer_options());
  for (std::size_t k = 0; !options.mixed_precision && k < units.size(); ++k) {
    units[k].shard.mutable_grad() = reducer->gradient_shard(bucket_of(k));
  }
  install_hooks();
}

// Pure checks of the parameters and units: identical on every rank, so all refuse alike.
void Zero3::Impl::check(const std::vector<std::vector<std::size_t>>& given) const {
  detail::check_mixed_precision(options.mixed_precision, params, "Zero3");
  std::unordered_map<const void*, std::size_t> seen_tensor;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& t = params[i];
    require_argument(t.defined() && t.requires_grad() && t.is_leaf() &&
                         at::isFloatingType(t.scalar_type()) && t.device().is_cpu(),
                     "Zero3: " + param_name(i) +
                         " is not a floating-point CPU leaf tensor that requires a gradient");
    const auto [it, fresh] = seen_tensor.emplace(t.unsafeGetTensorImpl(), i);
    require_argument(fresh, "Zero3: parameters " + std::to_string(it->second) + " and " +
                                std::to_string(i) + " are the same tensor");
  }
  require_argument(!given.empty(), "Zero3: no units");
  std::vector<std::size_t> unit_of_param(params.size(), given.size());
  for (std::size_t u = 0; u < given.size(); ++u) {
    require_argument(!given[u].empty(), "Zero3: unit " + std::to_string(u) + " is empty");
    for (std::size_t p : given[u]) {
      require_argument(p < params.size(), "Zero3: unit " + std::to_string(u) + " names " +
                                              param_name(p) + " of " +
                                              std::to_string(params.size()));
      require_argument(unit_of_param[p] == given.size(),
                       "Zero3: " + param_name(p) + " is in unit " +
                           std::to_string(unit_of_param[p]) + " and in unit " + std::to_string(u));
      unit_of_param[p] = u;
      require_argument(params[p].scalar_type() == params[given[u].front()].scalar_type(),
                       "Zero3: unit " + std::to_string(u) + " mixes dtypes (" +
                           param_name(given[u].front()) + " and " + param_name(p) + ")");
    }
  }
  std::size_t missing = 0;
  std::string first;
  for (std::size_t p = 0; p < params.size(); ++p) {
    if (unit_of_param[p] != given.size()) continue;
    if (missing++ == 0) first = param_name(p);
  }
  require_argument(missing == 0, "Zero3: the units miss " + std::to_string(missing) +
                                     " parameter(s), the first " + first +
                                     "; every parameter must be in exactly one unit");
}

// Each unit's parameters copied end to end into a flat buffer padded to a multiple of d, and
// rank 0's buffers broadcast when asked.
std::vector<at::Tensor> Zero3::Impl::whole_units(const std::vector<std::vector<std::size_t>>& u) {
  at::NoGradGuard no_grad;
  const std::int64_t d = group.size();
  unit_of.assign(params.size(), 0);
  std::vector<at::Tensor> flats;
  for (std::size_t k = 0; k < u.size(); ++k) {
    Zero3Unit unit;
    unit.layout.type = params[u[k].front()].scalar_type();
    for (std::size_t p : u[k]) {
      unit.layout.params.push_back(p);
      unit.layout.offsets.push_back(unit.layout.numel);
      unit.layout.numel += params[p].numel();
      unit_of[p] = k;
    }
    unit.layout.padded_numel = (unit.layout.numel + d - 1) / d * d;
    at::Tensor flat =
        at::zeros({unit.layout.padded_numel}, at::TensorOptions().dtype(unit.layout.type));
    for (std::size_t j = 0; j < u[k].size(); ++j) {
      const at::Tensor& param = params[u[k][j]];
      flat.narrow(0, unit.layout.offsets[j], param.numel()).copy_(param.reshape(-1));
    }
    if (options.broadcast_parameters && d > 1) {  // in the parameters' type (the masters')
      group.record(CollectiveKind::Broadcast, flat.numel() * flat.element_size());
      group.comm.broadcast(flat.data_ptr(), flat.data_ptr(), static_cast<std::size_t>(flat.numel()),
                           detail::chorus_dtype(flat.scalar_type(), "Zero3"), 0);
    }
    layouts.push_back(unit.layout);
    units.push_back(std::move(unit));
    flats.push_back(flat);
  }
  return flats;
}

// Every parameter becomes a view of its unit's storage (set_data keeps its autograd identity);
// then the storages are emptied: the whole values live only in the shards.
void Zero3::Impl::seat(std::vector<at::Tensor> flats) {
  at::NoGradGuard no_grad;
  for (std::size_t k = 0; k < units.size(); ++k) {
    Zero3Unit& unit = units[k];
    unit.storage = flats[k].storage();
    for (std::size_t j = 0; j < unit.layout.params.size(); ++j) {
      at::Tensor param = params[unit.layout.params[j]];
      param.set_data(
          alias_on(unit.storage, unit.layout.type, unit.layout.offsets[j], param.sizes()));
    }
    unit.state = Zero3Unit::State::Gathered;
    gathered_bytes += unit.bytes();
  }
  flats.clear();
  release_all();
  peak_gathered = 0;
}

ReducerOptions Zero3::Impl::reducer_options() const {
  ReducerOptions r;
  r.shared_buckets = false;
  r.overlap_backward = options.overlap_backward;
  r.sharding = GradSharding::Release;
  // Backward ends the units in reverse: the reducer launches its buckets in that order.
  for (std::size_t k = units.size(); k-- > 0;) r.buckets.push_back(units[k].layout.params);
  return r;
}

Zero3::Impl::~Impl() {
  for (std::size_t k = 0; k < accumulators.size(); ++k) {
    accumulators[k]->del_post_hook(hook_keys[k]);
  }
  for (Zero3Unit& unit : units) {
    if (unit.state != Zero3Unit::State::Gathering) continue;
    try {
      unit.request.wait();
    } catch (const std::exception&) {
      // The communicator's error reached (or will reach) the caller elsewhere.
    }
  }
}

Zero3::Zero3(std::vector<at::Tensor> params, std::vector<std::vector<std::size_t>> units,
             Group group, const ShardOptimizerFactory& make, Zero3Options options)
    : impl_(std::make_unique<Impl>(std::move(params), std::move(units), std::move(group), make,
                                   options)) {}

Zero3::~Zero3() = default;

void Zero3::zero_grad() {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : impl_->params) {
    if (p.grad().defined()) at::Tensor(p).mutable_grad() = at::Tensor();
  }
}

void Zero3::begin_step() { impl_->reducer->begin_step(); }

void Zero3::begin_weighted_step(std::int64_t weight, std::int64_t samples) {
  impl_->reducer->begin_weighted_step(weight, samples);
}

void Zero3::finish_step() {
  impl_->reducer->finish_step();
  std::lock_guard lock(impl_->mutex);
  impl_->release_all();
  impl_->previous = std::move(impl_->calls);
  impl_->calls.clear();
}

double Zero3::clip_grad_norm(double max_norm) {
  std::vector<NormPiece> pieces;
  for (const at::Tensor& g : gradient_shards()) pieces.push_back({g, {GradPlacement::Sharded}});
  return train::clip_grad_norm(pieces, {impl_->group}, max_norm);
}

void Zero3::step() {
  if (impl_->reducer->step_active()) {
    throw Error(Status::InvalidUsage,
                "Zero3::step: the gradient step is still active (finish_step first)");
  }
  if (!impl_->options.mixed_precision) {
    impl_->optimizer->step();
    return;
  }
  std::vector<at::Tensor> masters, halves;
  for (const Zero3Unit& unit : impl_->units) {
    masters.push_back(unit.shard);
    halves.push_back(unit.half);
  }
  detail::step_masters(*impl_->optimizer, masters, gradient_shards(), halves);
}

void Zero3::refresh_from_shards() {
  at::NoGradGuard no_grad;
  for (Zero3Unit& unit : impl_->units) {
    if (unit.half.defined()) unit.half.copy_(unit.shard);
  }
}

std::vector<at::Tensor> Zero3::master_parameters() {
  std::lock_guard lock(impl_->mutex);
  return detail::gather_shards(impl_->group, impl_->gather_comm, impl_->layouts, parameter_shards(),
                               impl_->params);
}

torch::optim::Optimizer& Zero3::optimizer() { return *impl_->optimizer; }

const GradientReducer& Zero3::reducer() const { return *impl_->reducer; }

const std::vector<BucketLayout>& Zero3::unit_layouts() const { return impl_->layouts; }

std::vector<at::Tensor> Zero3::parameter_shards() const {
  std::vector<at::Tensor> out;
  for (const Zero3Unit& unit : impl_->units) out.push_back(unit.shard);
  return out;
}

std::vector<at::Tensor> Zero3::gradient_shards() const {
  std::vector<at::Tensor> out;
  for (std::size_t k = 0; k < impl_->units.size(); ++k) {
    out.push_back(impl_->reducer->gradient_shard(impl_->bucket_of(k)));
  }
  return out;
}

std::vector<ShardPiece> Zero3::shard_layout() const {
  return shard_pieces(impl_->layouts, impl_->group.size(), impl_->group.rank());
}

Zero3::Memory Zero3::memory() const {
  Memory m;
  std::lock_guard lock(impl_->mutex);
  for (const Zero3Unit& unit : impl_->units) {
    m.parameters += unit.shard.numel() * unit.shard.element_size();
    if (unit.half.defined()) m.parameters += unit.half.numel() * unit.half.element_size();
  }
  m.parameters += impl_->gathered_bytes;
  m.gradients = impl_->reducer->gradient_bytes();
  m.optimizer_state = optimizer_state_bytes(*impl_->optimizer);
  m.peak_gathered = impl_->peak_gathered;
  return m;
}

void Zero3::reset_peak() {
  std::lock_guard lock(impl_->mutex);
  impl_->peak_gathered = impl_->gathered_bytes;
}

}  // namespace chorus::train
