// What ZeRO-1/2 (zero.cpp) and ZeRO-3 (zero3.cpp) share for mixed precision and for reading
// their shards back whole. Private to src/train.
#pragma once

#include <chorus/train/mesh.hpp>
#include <chorus/train/reducer.hpp>

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace chorus::train::detail {

/// InvalidArgument, starting with `who`, unless `type` is nullopt, or bf16 or fp16 with every
/// one of `params` fp32 ("ZeroOptimizer: mixed precision needs fp32 parameters (the masters'
/// type); parameter 3 is Double").
void check_mixed_precision(const std::optional<at::ScalarType>& type,
                           const std::vector<at::Tensor>& params, const std::string& who);

/// The optimizer's step on fp32 `masters` from the half `gradients` (shards of the same
/// sizes), upcast for the step and freed after it; the result rounded into `halves`.
void step_masters(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& masters,
                  const std::vector<at::Tensor>& gradients, const std::vector<at::Tensor>& halves);

/// Every parameter of `params` whole, from this rank's `shards` (shard k is block rank of
/// layouts[k], in the shards' dtype): one all-gather per layout (recorded on `group`) into a
/// fresh buffer, then each parameter copied out in its shape. Collective over `comm`.
std::vector<at::Tensor> gather_shards(const Group& group, Communicator comm,
                                      const std::vector<BucketLayout>& layouts,
                                      const std::vector<at::Tensor>& shards,
                                      const std::vector<at::Tensor>& params);

}  // namespace chorus::train::detail
