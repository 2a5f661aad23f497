// The state tensors of libtorch's element-wise optimizers, by name: their bytes
// (ZeroOptimizer::memory()) and one shard's state (shard_state(), for sharded checkpoints); and
// the pieces of a rank's shards (shard_pieces()). See zero.hpp.
#include "shard_checks.hpp"

#include <chorus/error.hpp>
#include <chorus/train/zero.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <unordered_set>

namespace chorus::train {
namespace {

/// One parameter's state as named tensors and a step count; false when its type is none of
/// libtorch's SGD, Adam, AdamW, Adagrad or RMSprop states.
bool named_state(const torch::optim::OptimizerParamState& state, ShardState& out) {
  using namespace torch::optim;
  const auto add = [&out](const char* name, const at::Tensor& t) {
    if (t.defined()) out.tensors.emplace_back(name, t);
  };
  if (const auto* s = dynamic_cast<const SGDParamState*>(&state)) {
    add("momentum_buffer", s->momentum_buffer());
    return true;
  }
  const auto adam = [&](const auto* s) {
    add("exp_avg", s->exp_avg());
    add("exp_avg_sq", s->exp_avg_sq());
    add("max_exp_avg_sq", s->max_exp_avg_sq());
    out.step = s->step();
  };
  if (const auto* s = dynamic_cast<const AdamParamState*>(&state)) {
    adam(s);
    return true;
  }
  if (const auto* s = dynamic_cast<const AdamWParamState*>(&state)) {
    adam(s);
    return true;
  }
  if (const auto* s = dynamic_cast<const AdagradParamState*>(&state)) {
    add("sum", s->sum());
    out.step = s->step();
    return true;
  }
  if (const auto* s = dynamic_cast<const RMSpropParamState*>(&state)) {
    add("square_avg", s->square_avg());
    add("momentum_buffer", s->momentum_buffer());
    add("grad_avg", s->grad_avg());
    out.step = s->step();
    return true;
  }
  return false;
}

std::string unknown_state(const std::string& what, const std::string& key) {
  return what + ": the optimizer's state of parameter " + key +
         " is of a type other than SGD's, Adam's, AdamW's, Adagrad's or RMSprop's";
}

}  // namespace

std::int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  std::int64_t total = 0;
  for (const auto& [key, state] : optimizer.state()) {
    ShardState named;
    require_argument(named_state(*state, named),
                     unknown_state("optimizer_state_bytes", key) + "; its size is unknown");
    for (const auto& [name, t] : named.tensors) {
      total += static_cast<std::int64_t>(t.numel() * t.element_size());
    }
  }
  return total;
}

ShardState shard_state(const torch::optim::Optimizer& optimizer, const at::Tensor& shard) {
  bool held = false;
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& t : group.params()) held = held || t.is_same(shard);
  }
  require_argument(held, "shard_state: the optimizer does not hold this tensor");
  // libtorch keys a parameter's state by its TensorImpl's address.
  const std::string key = c10::guts::to_string(shard.unsafeGetTensorImpl());
  ShardState out;
  const auto it = optimizer.state().find(key);
  if (it == optimizer.state().end()) return out;
  require_argument(named_state(*it->second, out), unknown_state("shard_state", key));
  return out;
}

void detail::require_optimizer_over(const torch::optim::Optimizer& optimizer,
                                    const std::vector<at::Tensor>& shards, const std::string& who,
                                    const std::string& what) {
  std::unordered_set<const void*> given;
  for (const at::Tensor& s : shards) given.insert(s.unsafeGetTensorImpl());
  std::size_t held = 0;
  std::size_t foreign = 0;
  for (const auto& param_group : optimizer.param_groups()) {
    for (const at::Tensor& t : param_group.params()) {
      ++held;
      if (given.count(t.unsafeGetTensorImpl()) == 0) ++foreign;
    }
  }
  require_argument(foreign == 0 && held == shards.size(),
                   who + ": the optimizer holds " + std::to_string(held) + " tensor(s), " +
                       std::to_string(foreign) + " of them not among the " +
                       std::to_string(shards.size()) + " " + what +
                       " it was given; build it over the factory's argument, not the model's "
                       "parameters");
}

std::vector<ShardPiece> shard_pieces(const std::vector<BucketLayout>& layouts, int ranks,
                                     int rank) {
  require_argument(ranks > 0 && rank >= 0 && rank < ranks,
                   "shard_pieces: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  std::vector<ShardPiece> out;
  for (std::size_t b = 0; b < layouts.size(); ++b) {
    const BucketLayout& layout = layouts[b];
    require_argument(layout.padded_numel % ranks == 0,
                     "shard_pieces: flat buffer " + std::to_string(b) + " of " +
                         std::to_string(layout.padded_numel) + " elements is not a multiple of " +
                         std::to_string(ranks) + " ranks");
    const std::int64_t chunk = layout.padded_numel / ranks;
    const std::int64_t begin = chunk * rank;
    const std::int64_t end = begin + chunk;
    for (std::size_t k = 0; k < layout.params.size(); ++k) {
      const std::int64_t first = layout.offsets[k];
      const std::int64_t last = k + 1 < layout.params.size() ? layout.offsets[k + 1] : layout.numel;
      const std::int64_t lo = std::max(first, begin);
      const std::int64_t hi = std::min(last, end);
      if (lo >= hi) continue;
      out.push_back({layout.params[k], lo - first, hi - lo, b, lo - begin});
    }
  }
  return out;
}

}  // namespace chorus::train
