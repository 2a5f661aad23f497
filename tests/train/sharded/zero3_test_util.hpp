// The ZeRO-3 tests' MLP (zero_test_util.hpp's) cut into units, one per Linear layer, and their
// small fp64 GPT with its token batches and optimizer.
#pragma once

#include <chorus/train/gpt.hpp>
#include <chorus/train/zero3.hpp>

#include "zero_test_util.hpp"

#include <torch/torch.h>

#include <vector>

namespace chorus::train::zero_test {

/// Each Linear's weight and bias: units of 70, 110 and 33 elements.
inline const std::vector<std::vector<std::size_t>> kMlpUnits{{0, 1}, {2, 3}, {4, 5}};

/// The MLP's forward pass with each Linear run through zero.run_unit.
inline at::Tensor sharded_mlp_forward(Zero3& zero, torch::nn::SequentialImpl& m, at::Tensor x) {
  for (std::size_t layer = 0; layer < kMlpUnits.size(); ++layer) {
    auto linear = m.ptr(2 * layer)->as<torch::nn::LinearImpl>();
    x = zero.run_unit(layer, x, [&](const at::Tensor& h) { return linear->forward(h); });
    if (layer + 1 < kMlpUnits.size()) x = torch::tanh(x);
  }
  return x;
}

// The GPT: sequence 12, global batch 12 (12 / dp samples per rank, the same count on each:
// the mean of the ranks' mean losses is the global mean).
inline constexpr std::int64_t kVocab = 10, kSeq = 12, kGptBatch = 12;

inline GptConfig gpt_config(std::int64_t layers = 2) {
  return {.layers = layers,
          .hidden = 24,
          .heads = 4,
          .vocab = kVocab,
          .sequence = kSeq,
          .seed = 5,
          .init_std = 0.3,
          .dtype = at::kDouble};
}

/// Step `step`'s tokens [kSeq, kGptBatch]: (i·mul + add + 3·step) mod kVocab.
inline at::Tensor gpt_tokens(std::size_t step, std::int64_t mul, std::int64_t add) {
  const auto n = kSeq * kGptBatch;
  return (at::arange(n, at::kLong) * mul + add + static_cast<std::int64_t>(step) * 3)
      .remainder(kVocab)
      .view({kSeq, kGptBatch});
}

// The key bias's gradient is zero in exact arithmetic (softmax ignores a shift shared by all
// keys), so it is rounding noise of about 1e-17; Adam divides that by its own size plus eps,
// and with the default eps 1e-8 the noise moves the bias by 1e-11, beyond the tolerance of a
// tensor whose largest element is 5e-2. eps 1e-5 keeps the noise at 1e-14.
inline std::unique_ptr<torch::optim::Optimizer> gpt_optimizer(Opt o,
                                                              std::vector<at::Tensor> params) {
  if (o != Opt::Adam) return make_optimizer(o, std::move(params));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0.01).eps(1e-5));
}

}  // namespace chorus::train::zero_test
