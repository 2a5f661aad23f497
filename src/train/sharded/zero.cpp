// ZeroOptimizer: parameters re-seated into flat buffers laid out like the reducer's buckets,
// gradients reduce-scattered by the reducer (GradSharding::Keep at stage 1, Release at stage 2),
// the optimizer stepping this rank's blocks, parameters all-gathered in place. See zero.hpp.
#include "../autograd/tensor_collectives.hpp"
#include "mixed_precision.hpp"
#include "shard_checks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/zero.hpp>

#include <torch/torch.h>

#include <string>

namespace chorus::train {
namespace {

/// A tensor of `sizes` sharing `flat`'s storage from element `offset` (not an autograd view:
/// an optimizer or set_data may take it as a leaf).
at::Tensor alias_of(const at::Tensor& flat, std::int64_t offset, at::IntArrayRef sizes) {
  const at::Tensor view = flat.narrow(0, offset, c10::multiply_integers(sizes)).view(sizes);
  at::Tensor alias = at::empty({0}, flat.options());
  alias.set_(flat.storage(), flat.storage_offset() + offset, sizes, view.strides());
  return alias;
}

/// The parameters, each turned into its compute copy under mixed precision (after every check,
/// so a refusal changes nothing); `initial` gets their fp32 values.
std::vector<at::Tensor> compute_copies(std::vector<at::Tensor> params, const ZeroOptions& o,
                                       std::vector<at::Tensor>& initial) {
  detail::check_mixed_precision(o.mixed_precision, params, "ZeroOptimizer");
  if (!o.mixed_precision) return params;
  at::NoGradGuard no_grad;
  for (at::Tensor& p : params) {
    initial.push_back(p.detach().clone());
    p.set_data(p.detach().to(*o.mixed_precision));
  }
  return params;
}

ReducerOptions reducer_options(const ZeroOptions& o) {
  require_argument(o.stage == 1 || o.stage == 2, "ZeroOptimizer: stage " + std::to_string(o.stage) +
                                                     " is not 1 or 2 (ZeRO-1 or ZeRO-2)");
  ReducerOptions r;
  r.bucket_cap_bytes = o.bucket_cap_bytes;
  r.first_bucket_bytes = o.first_bucket_bytes;
  r.shared_buckets = o.shared_buckets;
  r.overlap_backward = o.overlap_backward;
  r.autograd_hooks = o.autograd_hooks;
  r.sharding = o.stage == 1 ? GradSharding::Keep : GradSharding::Release;
  r.divisor = o.divisor;
  return r;
}

}  // namespace

struct ZeroOptimizer::Impl {
  Impl(std::vector<at::Tensor> p, Group g, const ShardOptimizerFactory& make, ZeroOptions o);
  void seat_parameters();
  void check_optimizer() const;
  void gather_parameters();  ///< every bucket all-gathered from the `sent` blocks
  std::int64_t chunk(std::size_t bucket) const {
    return layouts[bucket].padded_numel / group.size();
  }

  bool mixed() const { return options.mixed_precision.has_value(); }

  Group group;
  ZeroOptions options;
  std::vector<at::Tensor> initial;  ///< mixed precision: fp32 values until seated
  GradientReducer reducer;
  std::vector<BucketLayout> layouts;
  std::vector<at::Tensor> flats;   ///< the parameter buffers, one per bucket
  std::vector<at::Tensor> shards;  ///< the optimizer's parameters: block rank of each flat, or
                                   ///< with mixed precision its fp32 master
  std::vector<at::Tensor> sent;    ///< block rank of each flat, which the all-gathers send
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

ZeroOptimizer::Impl::Impl(std::vector<at::Tensor> p, Group g, const ShardOptimizerFactory& make,
                          ZeroOptions o)
    : group(g),
      options(o),
      reducer(compute_copies(std::move(p), o, initial), std::move(g), reducer_options(o)) {
  layouts = reducer.bucket_layouts();
  seat_parameters();
  for (std::size_t b = 0; b < layouts.size(); ++b) {
    sent.push_back(alias_of(flats[b], chunk(b) * group.rank(), {chunk(b)}));
    if (mixed()) continue;  // the masters' gradients are set by step()
    shards.push_back(sent.back());
    shards.back().mutable_grad() = reducer.gradient_shard(b);
  }
  require_argument(static_cast<bool>(make), "ZeroOptimizer: the optimizer factory is empty");
  optimizer = make(shards);
  require_argument(optimizer != nullptr, "ZeroOptimizer: the optimizer factory returned null");
  check_optimizer();
}

// Each bucket's parameters are copied into its flat buffer and re-seated onto their slices
// (set_data keeps the autograd identity, hooks included); then rank 0's values are broadcast.
// Under mixed precision the values are laid out and broadcast in fp32 first (the masters are
// rank 0's fp32 blocks) and the flat buffer is their rounding.
void ZeroOptimizer::Impl::seat_parameters() {
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor>& params = reducer.parameters();
  std::vector<at::Tensor> values;  // what is broadcast: the flats, or their fp32 originals
  for (const BucketLayout& layout : layouts) {
    at::Tensor flat =
        options.shared_buckets
            ? detail::shared_zeros(group.comm, layout.padded_numel, layout.type)
            : at::zeros({layout.padded_numel}, at::TensorOptions().dtype(layout.type));
    at::Tensor value = mixed() ? at::zeros({layout.padded_numel}, at::kFloat) : flat;
    for (std::size_t k = 0; k < layout.params.size(); ++k) {
      at::Tensor param = params[layout.params[k]];
      const at::Tensor& source = mixed() ? initial[layout.params[k]] : param;
      value.narrow(0, layout.offsets[k], param.numel()).copy_(source.reshape(-1));
      param.set_data(alias_of(flat, layout.offsets[k], param.sizes()));
    }
    flats.push_back(flat);
    values.push_back(value);
  }
  initial.clear();
  if (options.broadcast_parameters && group.size() > 1) {
    for (at::Tensor& value : values) {
      group.record(CollectiveKind::Broadcast, value.numel() * value.element_size());
      group.comm.broadcast(value.data_ptr(), value.data_ptr(),
                           static_cast<std::size_t>(value.numel()),
                           detail::chorus_dtype(value.scalar_type(), "ZeroOptimizer"), 0);
    }
  }
  if (!mixed()) return;
  for (std::size_t b = 0; b < flats.size(); ++b) {
    flats[b].copy_(values[b]);
    shards.push_back(values[b].narrow(0, chunk(b) * group.rank(), chunk(b)).clone());
  }
}

void ZeroOptimizer::Impl::check_optimizer() const {
  detail::require_optimizer_over(*optimizer, shards, "ZeroOptimizer", "shards");
}

ZeroOptimizer::ZeroOptimizer(std::vector<at::Tensor> params, Group group,
                             const ShardOptimizerFactory& make, ZeroOptions options)
    : impl_(std::make_unique<Impl>(std::move(params), std::move(group), make, options)) {}

ZeroOptimizer::~ZeroOptimizer() = default;

void ZeroOptimizer::zero_grad() {
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : impl_->reducer.parameters()) {
    if (!p.grad().defined()) continue;
    if (impl_->options.stage == 1) {
      at::Tensor(p.grad()).zero_();
    } else {
      at::Tensor(p).mutable_grad() = at::Tensor();
    }
  }
}

void ZeroOptimizer::begin_step() { impl_->reducer.begin_step(); }

void ZeroOptimizer::begin_weighted_step(std::int64_t weight, std::int64_t samples) {
  impl_->reducer.begin_weighted_step(weight, samples);
}

void ZeroOptimizer::mark_ready(const at::Tensor& param) { impl_->reducer.mark_ready(param); }

void ZeroOptimizer::finish_step() { impl_->reducer.finish_step(); }

double ZeroOptimizer::clip_grad_norm(double max_norm) {
  const std::size_t count = impl_->reducer.parameters().size();
  return clip_grad_norm(max_norm, std::vector<std::vector<GradPlacement>>(count), {});
}

// Each shard piece is a slice of a gradient shard: scaling it scales the shard in place.
double ZeroOptimizer::clip_grad_norm(double max_norm,
                                     const std::vector<std::vector<GradPlacement>>& placements,
                                     const std::vector<Group>& groups) {
  const std::size_t count = impl_->reducer.parameters().size();
  require_argument(placements.size() == count,
                   "ZeroOptimizer::clip_grad_norm: " + std::to_string(placements.size()) +
                       " placements for " + std::to_string(count) + " parameters");
  const std::vector<at::Tensor> shards = gradient_shards();
  std::vector<NormPiece> pieces;
  for (const ShardPiece& piece : shard_layout()) {
    std::vector<GradPlacement> over = placements[piece.param];
    require_argument(over.size() == groups.size(),
                     "ZeroOptimizer::clip_grad_norm: parameter " + std::to_string(piece.param) +
                         " has " + std::to_string(over.size()) + " placements for " +
                         std::to_string(groups.size()) + " groups");
    over.push_back(GradPlacement::Sharded);
    pieces.push_back(
        {shards[piece.shard].narrow(0, piece.shard_offset, piece.length), std::move(over)});
  }
  std::vector<Group> all = groups;
  all.push_back(impl_->group);
  return train::clip_grad_norm(pieces, all, max_norm);
}

void ZeroOptimizer::step() {
  if (impl_->reducer.step_active()) {
    throw Error(Status::InvalidUsage,
                "ZeroOptimizer::step: the gradient step is still active (finish_step first)");
  }
  if (impl_->mixed()) {
    detail::step_masters(*impl_->optimizer, impl_->shards, gradient_shards(), impl_->sent);
  } else {
    impl_->optimizer->step();
  }
  impl_->gather_parameters();
}

void ZeroOptimizer::refresh_from_shards() {
  if (impl_->mixed()) {
    at::NoGradGuard no_grad;
    for (std::size_t b = 0; b < impl_->shards.size(); ++b) impl_->sent[b].copy_(impl_->shards[b]);
  }
  impl_->gather_parameters();
}

// The all-gathers are in place (rank r's block of the flat buffer is its send buffer) and all
// issued before the first wait, so they pipeline.
void ZeroOptimizer::Impl::gather_parameters() {
  if (group.size() == 1) return;
  std::vector<chorus::Request> requests;
  for (std::size_t b = 0; b < flats.size(); ++b) {
    at::Tensor& flat = flats[b];
    group.record(CollectiveKind::AllGather, flat.numel() * flat.element_size());
    requests.push_back(group.comm.iall_gather(
        sent[b].data_ptr(), flat.data_ptr(), static_cast<std::size_t>(chunk(b)),
        detail::chorus_dtype(flat.scalar_type(), "ZeroOptimizer")));
  }
  for (chorus::Request& r : requests) r.wait();
}

torch::optim::Optimizer& ZeroOptimizer::optimizer() { return *impl_->optimizer; }

const GradientReducer& ZeroOptimizer::reducer() const { return impl_->reducer; }

int ZeroOptimizer::stage() const { return impl_->options.stage; }

std::vector<at::Tensor> ZeroOptimizer::parameter_shards() const { return impl_->shards; }

std::vector<at::Tensor> ZeroOptimizer::gradient_shards() const {
  std::vector<at::Tensor> out;
  for (std::size_t b = 0; b < impl_->layouts.size(); ++b) {
    out.push_back(impl_->reducer.gradient_shard(b));
  }
  return out;
}

std::vector<ShardPiece> ZeroOptimizer::shard_layout() const {
  return shard_pieces(impl_->layouts, impl_->group.size(), impl_->group.rank());
}

std::vector<at::Tensor> ZeroOptimizer::master_parameters() {
  return detail::gather_shards(impl_->group, impl_->group.comm, impl_->layouts, impl_->shards,
                               impl_->reducer.parameters());
}

ZeroOptimizer::Memory ZeroOptimizer::memory() const {
  Memory m;
  for (const at::Tensor& flat : impl_->flats) m.parameters += flat.numel() * flat.element_size();
  if (impl_->mixed()) {
    for (const at::Tensor& master : impl_->shards) {
      m.parameters += master.numel() * master.element_size();
    }
  }
  m.gradients = impl_->reducer.gradient_bytes();
  m.optimizer_state = optimizer_state_bytes(*impl_->optimizer);
  return m;
}

}  // namespace chorus::train
