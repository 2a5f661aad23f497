// The column-parallel product under sequence parallelism; see sequence_parallel_linear.hpp.
#include "sequence_parallel_linear.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <utility>

namespace chorus::train::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr const char* kWhat = "ColumnParallelLinear (sequence parallel)";

/// What backward needs besides tensors: the group, the sequence dimension, the store.
struct Capsule : torch::CustomClassHolder {
  Capsule(Group g, std::int64_t d, std::shared_ptr<WeightGradientStore> s)
      : tp(std::move(g)), dim(d), store(std::move(s)) {}
  Group tp;
  std::int64_t dim;
  std::shared_ptr<WeightGradientStore> store;
};

struct SequenceParallelLinear : torch::autograd::Function<SequenceParallelLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const c10::intrusive_ptr<Capsule>& capsule) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["capsule"] = c10::IValue::make_capsule(capsule);
    return at::matmul(all_gather_along(capsule->tp, x, capsule->dim, kWhat), weight.t());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const auto* capsule = static_cast<const Capsule*>(ctx->saved_data["capsule"].toCapsule().get());
    const at::Tensor& dy = grads[0];
    at::Tensor weight_grad;
    if (ctx->needs_input_grad(1)) {
      const at::Tensor gathered = all_gather_along(capsule->tp, x, capsule->dim, kWhat);
      if (capsule->store) {
        capsule->store->push(gathered, dy);
      } else {
        weight_grad =
            dy.reshape({-1, dy.size(-1)}).t().mm(gathered.reshape({-1, gathered.size(-1)}));
      }
    }
    at::Tensor input_grad;
    if (ctx->needs_input_grad(0)) {
      input_grad = reduce_scatter_along(capsule->tp, at::matmul(dy, weight), capsule->dim, kWhat);
    }
    return {input_grad, weight_grad, {}};
  }
};

}  // namespace

at::Tensor sequence_parallel_linear(const at::Tensor& x, const at::Tensor& weight, const Group& tp,
                                    std::int64_t dim,
                                    const std::shared_ptr<WeightGradientStore>& store) {
  return SequenceParallelLinear::apply(x, weight, c10::make_intrusive<Capsule>(tp, dim, store));
}

}  // namespace chorus::train::detail
