// ShardedState: what a rank holds of the training state (DDP's or ZeRO's), and its pieces in the
// checkpoint format; see sharded_checkpoint.hpp.
#include "sharded_state.hpp"

#include <chorus/error.hpp>
#include <chorus/train/sharded_checkpoint.hpp>
#include <chorus/train/zero.hpp>
#include <chorus/train/zero3.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <unordered_map>

namespace chorus::train {
namespace detail {

std::int64_t local_numel(const TensorPiece& p) {
  return c10::multiply_integers(piece_shape(p.name, p.global_shape, p.placements));
}

std::vector<Placement> span_placements(const ShardedState& s, const TensorPiece& p,
                                       const FlatSpan& span) {
  std::vector<Placement> out = p.placements;
  if (s.replicated && span.parameter_offset == 0 && span.length == local_numel(p)) {
    out.push_back(Placement::replicate(s.mesh_dim, s.index, s.count));
  } else {
    // A replicated state's span of part of a parameter (a run of a reordered layout) is the same
    // range on every rank of the group: the save writes it once.
    out.push_back(
        Placement::flat(s.mesh_dim, s.index, s.count, span.parameter_offset, span.length));
  }
  return out;
}

std::vector<Placement> step_placements(const ShardedState& s, const TensorPiece& p) {
  std::vector<Placement> out;
  for (const Placement& cut : p.placements) {
    out.push_back(Placement::replicate(cut.mesh_dim, cut.index, cut.count));
  }
  out.push_back(Placement::replicate(s.mesh_dim, s.index, s.count));
  return out;
}

at::Tensor holder_range(const ShardedState& s, const FlatSpan& span, const at::Tensor& of) {
  const at::Tensor& holder = s.holders.at(span.holder);
  require_argument(
      span.parameter < s.parameters.size() && span.holder_offset >= 0 && span.length >= 0 &&
          span.holder_offset + span.length <= holder.numel() && span.parameter_offset >= 0 &&
          span.parameter_offset + span.length <= local_numel(s.parameters[span.parameter]),
      "sharded checkpoints: a span of holder " + std::to_string(span.holder) +
          " lies outside its holder or its parameter");
  return of.reshape(-1).narrow(0, span.holder_offset, span.length);
}

std::string slot_name(const std::string& slot, const std::string& parameter) {
  return "optimizer/" + slot + "/" + parameter;
}

}  // namespace detail

std::vector<TensorPiece> module_parameter_pieces(torch::nn::Module& model) {
  std::vector<TensorPiece> out;
  for (const auto& p : model.named_parameters()) {
    out.push_back({p.key(), p.value().sizes().vec(), p.value().scalar_type(), {}, p.value()});
  }
  return out;
}

ShardedState replicated_state(torch::optim::Optimizer& optimizer,
                              std::vector<TensorPiece> parameters, const Group& group) {
  ShardedState s{std::move(parameters), &optimizer,   {},   {},  group.name,
                 group.rank(),          group.size(), true, true};
  std::unordered_map<const void*, std::size_t> index;
  for (std::size_t i = 0; i < s.parameters.size(); ++i) {
    index.emplace(s.parameters[i].data.unsafeGetTensorImpl(), i);
  }
  for (const auto& param_group : optimizer.param_groups()) {
    for (const at::Tensor& t : param_group.params()) {
      const auto it = index.find(t.unsafeGetTensorImpl());
      require_argument(it != index.end(),
                       "replicated_state: the optimizer holds a tensor of shape " +
                           c10::str(t.sizes()) + " that is none of the parameters given");
      s.spans.push_back({it->second, 0, s.holders.size(), 0, t.numel()});
      s.holders.push_back(t);
    }
  }
  return s;
}

namespace {

/// The state of a sharded optimizer over `holders` whose pieces are `layout` (ZeroOptimizer's or
/// Zero3's shard_layout()): `parameters` matched by identity to the reducer's trained tensors
/// and reordered like them, one span per piece.
ShardedState flat_state(const std::string& who, const GradientReducer& reducer,
                        torch::optim::Optimizer& optimizer, std::vector<at::Tensor> holders,
                        const std::vector<ShardPiece>& layout,
                        const std::vector<TensorPiece>& parameters) {
  const Group& group = reducer.group();
  ShardedState s{{},    &optimizer, std::move(holders), {}, group.name, group.rank(), group.size(),
                 false, true};
  std::unordered_map<const void*, std::size_t> named;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    named.emplace(parameters[i].data.unsafeGetTensorImpl(), i);
  }
  const std::vector<at::Tensor>& trained = reducer.parameters();
  for (std::size_t k = 0; k < trained.size(); ++k) {
    const auto it = named.find(trained[k].unsafeGetTensorImpl());
    require_argument(it != named.end(), who + ": the optimizer's parameter " + std::to_string(k) +
                                            " is none of the named parameters given");
    s.parameters.push_back(parameters[it->second]);
  }
  for (const ShardPiece& piece : layout) {
    s.spans.push_back(
        {piece.param, piece.param_offset, piece.shard, piece.shard_offset, piece.length});
  }
  // The values saved are the holders' (with mixed precision the fp32 masters, which the
  // parameters' half type does not name). A rank may hold no part of a parameter: the holders'
  // common dtype names them all (without mixed precision it is every parameter's own).
  const bool one_type = std::all_of(s.holders.begin(), s.holders.end(), [&](const at::Tensor& h) {
    return h.scalar_type() == s.holders.front().scalar_type();
  });
  if (!s.holders.empty() && one_type) {
    for (TensorPiece& p : s.parameters) p.dtype = s.holders.front().scalar_type();
  }
  return s;
}

/// `span` cut where `saved` (the saved flat index of each of its elements, -1 for none) stops
/// counting up by one: spans in the saved layout's coordinates.
void append_saved_runs(const FlatSpan& span, const at::Tensor& saved, std::vector<FlatSpan>& out) {
  const at::Tensor index = saved.narrow(0, span.parameter_offset, span.length).contiguous();
  const std::int64_t* v = index.data_ptr<std::int64_t>();
  std::int64_t start = 0;
  for (std::int64_t i = 1; i <= span.length; ++i) {
    if (i < span.length && v[i - 1] >= 0 && v[i] == v[i - 1] + 1) continue;
    if (v[start] >= 0) {
      out.push_back({span.parameter, v[start], span.holder, span.holder_offset + start, i - start});
    }
    start = i;
  }
}

}  // namespace

ShardedState zero_state(ZeroOptimizer& zero, std::vector<TensorPiece> parameters) {
  return flat_state("zero_state", zero.reducer(), zero.optimizer(), zero.parameter_shards(),
                    zero.shard_layout(), parameters);
}

ShardedState zero3_state(Zero3& zero, std::vector<TensorPiece> parameters) {
  ShardedState s = flat_state("zero3_state", zero.reducer(), zero.optimizer(),
                              zero.parameter_shards(), zero.shard_layout(), parameters);
  for (TensorPiece& p : s.parameters) p.data = at::Tensor();  // the rank holds its spans only
  return s;
}

void detail::to_saved_layout(ShardedState& s, const std::vector<at::Tensor>& saved_index) {
  require_argument(saved_index.size() == s.parameters.size(),
                   "sharded checkpoints: " + std::to_string(saved_index.size()) +
                       " saved layouts for " + std::to_string(s.parameters.size()) + " parameters");
  std::vector<FlatSpan> spans;
  for (const FlatSpan& span : s.spans) {
    append_saved_runs(span, saved_index.at(span.parameter), spans);
  }
  s.spans = std::move(spans);
}

std::vector<TensorPiece> sharded_state_pieces(const ShardedState& s) {
  require_argument(s.optimizer != nullptr, "sharded_state_pieces: the state has no optimizer");
  const detail::SlotKind kind = detail::slot_kind(*s.optimizer);
  std::vector<std::optional<detail::SlotValues>> slots;
  for (const at::Tensor& holder : s.holders) {
    slots.push_back(detail::read_slots(*s.optimizer, kind, holder));
  }
  std::vector<TensorPiece> out;
  for (const FlatSpan& span : s.spans) {
    const TensorPiece& p = s.parameters.at(span.parameter);
    const std::vector<Placement> cut = detail::span_placements(s, p, span);
    const auto shape = piece_shape(p.name, p.global_shape, cut);
    const auto piece = [&](const std::string& name, const at::Tensor& of) {
      out.push_back({name, p.global_shape, p.dtype, cut,
                     detail::holder_range(s, span, of.detach()).view(shape)});
    };
    piece(p.name, s.holders[span.holder]);
    const auto& values = slots[span.holder];
    if (!values) continue;
    for (std::size_t i = 0; i < kind.slots.size(); ++i) {
      piece(detail::slot_name(kind.slots[i], p.name), values->tensors[i]);
    }
    if (kind.has_step) {
      out.push_back({detail::slot_name("step", p.name),
                     {},
                     at::kLong,
                     detail::step_placements(s, p),
                     at::scalar_tensor(values->step, at::kLong)});
    }
  }
  return out;
}

}  // namespace chorus::train
