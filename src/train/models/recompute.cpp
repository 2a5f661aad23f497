// Activation recomputation; see recompute.hpp.
#include "recompute.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <utility>

namespace chorus::train::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// What backward needs besides the saved inputs: the function and the parameters.
struct RecomputeCapsule : torch::CustomClassHolder {
  RecomputeCapsule(Recomputable f, std::vector<at::Tensor> p)
      : fn(std::move(f)), parameters(std::move(p)) {}
  Recomputable fn;
  std::vector<at::Tensor> parameters;
};

const RecomputeCapsule& capsule_of(AutogradContext* ctx) {
  return *static_cast<const RecomputeCapsule*>(ctx->saved_data["fn"].toCapsule().get());
}

/// Forward arguments: the inputs, the parameters (both differentiable), the capsule.
struct RecomputeFunction : torch::autograd::Function<RecomputeFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList inputs, at::TensorList,
                            const c10::intrusive_ptr<RecomputeCapsule>& capsule) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["fn"] = c10::IValue::make_capsule(capsule);
    return capsule->fn(inputs.vec());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const RecomputeCapsule& c = capsule_of(ctx);
    const variable_list saved = ctx->get_saved_variables();
    const std::size_t n = saved.size(), m = c.parameters.size();
    std::vector<at::Tensor> inputs, wanted;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < n; ++i) {
      const bool needed = ctx->needs_input_grad(i);
      inputs.push_back(saved[i].detach().requires_grad_(needed));
      if (needed) wanted.push_back(inputs.back()), where.push_back(i);
    }
    for (std::size_t j = 0; j < m; ++j) {
      if (ctx->needs_input_grad(n + j)) wanted.push_back(c.parameters[j]), where.push_back(n + j);
    }
    variable_list result(n + m + 1);
    at::Tensor output;
    {
      const at::AutoGradMode grad_on(true);
      output = c.fn(inputs);
    }
    if (wanted.empty() || !output.requires_grad()) return result;
    const variable_list got = torch::autograd::grad({output}, wanted, {grads[0]},
                                                    /*retain_graph=*/false,
                                                    /*create_graph=*/false, /*allow_unused=*/true);
    for (std::size_t k = 0; k < got.size(); ++k) result[where[k]] = got[k];
    return result;
  }
};

}  // namespace

at::Tensor recomputed(Recomputable fn, const std::vector<at::Tensor>& inputs,
                      const std::vector<at::Tensor>& parameters) {
  return RecomputeFunction::apply(at::TensorList(inputs), at::TensorList(parameters),
                                  c10::make_intrusive<RecomputeCapsule>(std::move(fn), parameters));
}

}  // namespace chorus::train::detail
