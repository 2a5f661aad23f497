// The GPT model under Zero3: its units (the embedding with the parts that share its unit, then
// one per block), its loss run unit by unit (zero3.hpp), and its state in the GPT checkpoint
// layout (sharded_checkpoint.hpp).
#include "sharded_state.hpp"

#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
#include <chorus/train/gpt_checkpoint.hpp>
#include <chorus/train/sharded_checkpoint.hpp>
#include <chorus/train/zero3.hpp>

#include <ATen/ATen.h>

#include <string>

namespace chorus::train {

std::vector<std::vector<std::size_t>> gpt_units(const GptModel& model) {
  const std::vector<GptParameter> named = model.named_parameters();
  const auto layers = static_cast<std::size_t>(model.config().layers);
  std::vector<std::vector<std::size_t>> units(1 + layers);
  for (std::size_t i = 0; i < named.size(); ++i) {
    std::size_t unit = 0;
    for (std::size_t b = 0; b < layers; ++b) {
      if (named[i].name.rfind("layers." + std::to_string(b) + ".", 0) == 0) unit = 1 + b;
    }
    units[unit].push_back(i);
  }
  for (std::size_t u = 0; u < units.size(); ++u) {
    require_argument(!units[u].empty(), "gpt_units: the model does not build " +
                                            (u == 0 ? std::string("its embedding")
                                                    : "block " + std::to_string(u - 1)));
  }
  return units;
}

at::Tensor gpt_loss(const GptModel& model, Zero3& zero, const at::Tensor& tokens,
                    const at::Tensor& targets) {
  const int cp = model.cp() ? model.cp()->size() : 1;
  require_argument(cp == 1, "gpt_loss: a model split over " + std::to_string(cp) +
                                " context-parallel ranks (ZeRO-3 runs the two-group model)");
  at::Tensor x = zero.run_unit(0, tokens, [&](const at::Tensor& t) { return model.embed(t); });
  for (std::int64_t b = 0; b < model.config().layers; ++b) {
    x = zero.run_unit(static_cast<std::size_t>(1 + b), x,
                      [&](const at::Tensor& h) { return model.run_blocks(h, b, 1); });
  }
  const at::Tensor logits = zero.run_unit(0, x, [&](const at::Tensor& h) { return model.head(h); });
  // GptModel::loss without context parallelism: the mean of the token losses.
  return vocab_parallel_cross_entropy(logits, targets, model.tp(), model.config().vocab).mean();
}

// The saved layout of each parameter is found by saving an index: gpt_checkpoint_pieces of
// tensors holding 0, 1, 2, ... (each local element's flat index) gives, at every saved
// position, the local element saved there; inverting that gives each local element's saved
// index (-1 where nothing is saved: vocabulary padding).
ShardedState gpt_zero3_state(const GptModel& model, Zero3& zero) {
  const std::vector<GptParameter> named = model.named_parameters();
  std::vector<GptParameter> index = named;
  for (GptParameter& p : index) {
    p.tensor = at::arange(p.tensor.numel(), at::kLong).view(p.tensor.sizes());
  }
  std::vector<TensorPiece> pieces = gpt_checkpoint_pieces(index, model.config(), model.tp());
  std::vector<at::Tensor> saved_index;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const at::Tensor local = pieces[i].data.reshape(-1);
    at::Tensor saved = at::full({named[i].tensor.numel()}, -1, at::kLong);
    saved.index_copy_(0, local, at::arange(local.numel(), at::kLong));
    saved_index.push_back(saved);
    pieces[i].dtype = named[i].tensor.scalar_type();
    pieces[i].data = named[i].tensor;  // matched by identity to zero's parameters
  }
  ShardedState state = zero3_state(zero, std::move(pieces));
  // zero3_state ordered the parameters like zero's: their saved indices follow that order.
  std::vector<at::Tensor> ordered;
  for (const TensorPiece& p : state.parameters) {
    std::size_t i = 0;
    while (named[i].name != p.name) ++i;
    ordered.push_back(saved_index[i]);
  }
  detail::to_saved_layout(state, ordered);
  return state;
}

}  // namespace chorus::train
