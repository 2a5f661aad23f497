// The GPT's training state under every strategy (DDP, ZeRO-1/2, ZeRO-3) in the GPT checkpoint
// layout (gpt_checkpoint.hpp), so that one checkpoint kind resumes under any strategy and
// layout; see sharded_checkpoint.hpp.
#include "sharded_state.hpp"

#include <chorus/train/gpt.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/sharded_checkpoint.hpp>
#include <chorus/train/zero.hpp>
#include <chorus/train/zero3.hpp>

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>

namespace chorus::train {
namespace {

using MakeState = std::function<ShardedState(std::vector<TensorPiece>)>;

// `make` gets the parameters' pieces in the saved layout, their data the parameters themselves
// (matched by identity to the optimizer's or the sharding class's tensors). The saved layout of
// each parameter is found by saving an index: gpt_checkpoint_pieces of tensors holding 0, 1, 2,
// ... (each local element's flat index) gives, at every saved position, the local element saved
// there; inverting that gives each local element's saved index (-1 where nothing is saved:
// vocabulary padding). The state's spans are then rewritten into the saved layout, and the
// parameters' data left undefined: the rank's values are its holders'.
ShardedState gpt_state(const std::vector<GptParameter>& named, const GptConfig& config,
                       const Group& tp, const MakeState& make) {
  std::vector<GptParameter> index = named;
  for (GptParameter& p : index) {
    p.tensor = at::arange(p.tensor.numel(), at::kLong).view(p.tensor.sizes());
  }
  std::vector<TensorPiece> pieces = gpt_checkpoint_pieces(index, config, tp);
  std::map<std::string, at::Tensor> saved_index;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const at::Tensor local = pieces[i].data.reshape(-1);
    at::Tensor saved = at::full({named[i].tensor.numel()}, -1, at::kLong);
    saved.index_copy_(0, local, at::arange(local.numel(), at::kLong));
    saved_index[named[i].name] = saved;
    pieces[i].dtype = named[i].tensor.scalar_type();
    pieces[i].data = named[i].tensor;
  }
  ShardedState state = make(std::move(pieces));
  std::vector<at::Tensor> ordered;  // the state may order the parameters its own way
  for (const TensorPiece& p : state.parameters) ordered.push_back(saved_index.at(p.name));
  detail::to_saved_layout(state, ordered);
  for (TensorPiece& p : state.parameters) p.data = at::Tensor();
  return state;
}

}  // namespace

ShardedState gpt_zero3_state(const GptModel& model, Zero3& zero) {
  return gpt_state(model.named_parameters(), model.config(), model.tp(),
                   [&](std::vector<TensorPiece> pieces) { return zero3_state(zero, pieces); });
}

ShardedState gpt_replicated_state(const std::vector<GptParameter>& parameters,
                                  const GptConfig& config, const Group& tp,
                                  torch::optim::Optimizer& optimizer, const Group& group) {
  return gpt_state(parameters, config, tp, [&](std::vector<TensorPiece> pieces) {
    return replicated_state(optimizer, std::move(pieces), group);
  });
}

ShardedState gpt_zero_state(const std::vector<GptParameter>& parameters, const GptConfig& config,
                            const Group& tp, ZeroOptimizer& zero) {
  return gpt_state(parameters, config, tp,
                   [&](std::vector<TensorPiece> pieces) { return zero_state(zero, pieces); });
}

}  // namespace chorus::train
