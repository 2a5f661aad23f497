// Checks the ZeRO stages share (zero.cpp, zero3.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace chorus::train::detail {

/// InvalidArgument, starting with `who`, unless `optimizer` holds exactly the tensors
/// `shards` (`what` names them in the sentence): an optimizer built over the model's
/// parameters instead of the factory's argument.
void require_optimizer_over(const torch::optim::Optimizer& optimizer,
                            const std::vector<at::Tensor>& shards, const std::string& who,
                            const std::string& what);

}  // namespace chorus::train::detail
