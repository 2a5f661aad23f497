// The ZeRO-3 tests' MLP (zero_test_util.hpp's) cut into units: one per Linear layer.
#pragma once

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

}  // namespace chorus::train::zero_test
