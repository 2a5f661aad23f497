// The deferred weight gradient of a linear layer (tensor_parallel.hpp, defer_weight_gradient):
// backward computes only the input gradient and keeps what the weight gradient needs, the
// layer's input and output gradient; a later explicit call computes the weight gradients and
// adds them to weight.grad(). A pipeline's zero-bubble schedule splits backward this way into
// its B (input gradient) and W (weight gradient) steps.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace chorus::train::detail {

/// The pending weight gradients of one weight, one entry per backward through the layer, in
/// the order backward produced them. Shared by the layer and the autograd nodes of its
/// forward passes; thread-safe.
class WeightGradientStore {
 public:
  /// Keeps (input [..., in], output gradient [..., out]) of one backward.
  void push(at::Tensor input, at::Tensor output_grad);
  /// Adds Σ output_gradᵀ · input over every pending entry, oldest first, to weight.grad()
  /// (setting it when undefined) and forgets them; returns how many there were.
  std::size_t flush(const at::Tensor& weight);
  std::size_t pending() const;

 private:
  struct Entry {
    at::Tensor input, output_grad;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

/// x · weightᵀ (no bias) whose backward returns the input gradient and pushes the weight's
/// share to `store` instead of returning it.
at::Tensor linear_deferring_weight(const at::Tensor& x, const at::Tensor& weight,
                                   const std::shared_ptr<WeightGradientStore>& store);

/// at::linear(x, weight, bias), or with a store x·weightᵀ through linear_deferring_weight,
/// then + bias.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  const std::shared_ptr<WeightGradientStore>& store);

}  // namespace chorus::train::detail
