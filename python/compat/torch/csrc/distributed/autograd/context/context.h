// Debian's libtorch-dev 1.13 ships torch/csrc/distributed/c10d/reducer.hpp but not this
// header, which reducer.hpp includes for two names of torch's RPC autograd: the type of its
// gradient callbacks (checked by a static_assert) and the pointer type of a member that
// Chorus never touches. ddp_hook.cpp includes reducer.hpp to call
// Reducer::register_comm_hook; this declares those two names as torch defines them.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch::distributed::autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};

using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace torch::distributed::autograd
