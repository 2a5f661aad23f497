// The column-parallel linear layer's product under sequence parallelism, keeping only this
// rank's s/t rows of the input for backward (Megatron's choice, the one PARALLEL.md's
// activation memory under SP assumes): forward all-gathers the input along the sequence and
// multiplies; backward all-gathers it again for the weight gradient and reduce-scatters the
// input gradient. One all-gather more per layer and backward than keeping the gathered input,
// for t times less activation memory at the layer's input.
#pragma once

#include "deferred_weight.hpp"

#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace chorus::train::detail {

/// all_gather(x, dim over tp) · weightᵀ (no bias). Backward: the input gradient
/// reduce_scatter(dy · weight) along dim, the weight gradient dyᵀ · all_gather(x) (pushed to
/// `store` with the gathered input instead, when there is one).
at::Tensor sequence_parallel_linear(const at::Tensor& x, const at::Tensor& weight, const Group& tp,
                                    std::int64_t dim,
                                    const std::shared_ptr<WeightGradientStore>& store);

}  // namespace chorus::train::detail
