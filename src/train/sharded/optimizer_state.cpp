// The bytes of an optimizer's state tensors, for ZeroOptimizer::memory(); see zero.hpp.
#include <chorus/error.hpp>
#include <chorus/train/zero.hpp>

#include <torch/torch.h>

#include <initializer_list>
#include <string>

namespace chorus::train {
namespace {

std::int64_t bytes_of(std::initializer_list<at::Tensor> tensors) {
  std::int64_t total = 0;
  for (const at::Tensor& t : tensors) {
    if (t.defined()) total += static_cast<std::int64_t>(t.numel() * t.element_size());
  }
  return total;
}

/// The bytes of one parameter's state, or -1 when its type is none of libtorch's element-wise
/// optimizers'.
std::int64_t state_bytes(const torch::optim::OptimizerParamState& state) {
  using namespace torch::optim;
  if (const auto* s = dynamic_cast<const SGDParamState*>(&state)) {
    return bytes_of({s->momentum_buffer()});
  }
  if (const auto* s = dynamic_cast<const AdamParamState*>(&state)) {
    return bytes_of({s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()});
  }
  if (const auto* s = dynamic_cast<const AdamWParamState*>(&state)) {
    return bytes_of({s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()});
  }
  if (const auto* s = dynamic_cast<const AdagradParamState*>(&state)) {
    return bytes_of({s->sum()});
  }
  if (const auto* s = dynamic_cast<const RMSpropParamState*>(&state)) {
    return bytes_of({s->square_avg(), s->momentum_buffer(), s->grad_avg()});
  }
  return -1;
}

}  // namespace

std::int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  std::int64_t total = 0;
  for (const auto& [key, state] : optimizer.state()) {
    const std::int64_t bytes = state_bytes(*state);
    require_argument(bytes >= 0, "optimizer_state_bytes: the optimizer's state of parameter " +
                                     key +
                                     " is of a type other than SGD's, Adam's, AdamW's, "
                                     "Adagrad's or RMSprop's; its size is unknown");
    total += bytes;
  }
  return total;
}

}  // namespace chorus::train
