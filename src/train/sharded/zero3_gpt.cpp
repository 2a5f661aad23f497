// The GPT model under Zero3: its units (the embedding with the parts that share its unit, then
// one per block) and its loss run unit by unit (zero3.hpp).
#include <chorus/error.hpp>
#include <chorus/train/gpt.hpp>
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

}  // namespace chorus::train
