// The deferred weight gradient; see deferred_weight.hpp.
//
// For y = x · Wᵀ with x [n, in] and y [n, out] (leading dimensions flattened into n), the
// input gradient is dy · W and the weight gradient dyᵀ · x: the first needs W, the second only
// x and dy, so backward can return the first at once and leave the second for later.
#include "deferred_weight.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <memory>
#include <utility>

namespace chorus::train::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct StoreCapsule : torch::CustomClassHolder {
  explicit StoreCapsule(std::shared_ptr<WeightGradientStore> s) : store(std::move(s)) {}
  std::shared_ptr<WeightGradientStore> store;
};

struct LinearDeferringWeight : torch::autograd::Function<LinearDeferringWeight> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const c10::intrusive_ptr<StoreCapsule>& store) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["store"] = c10::IValue::make_capsule(store);
    return at::matmul(x, weight.t());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    at::Tensor input_grad;
    if (ctx->needs_input_grad(0)) input_grad = at::matmul(grads[0], weight);
    if (ctx->needs_input_grad(1)) {
      const auto* capsule =
          static_cast<const StoreCapsule*>(ctx->saved_data["store"].toCapsule().get());
      capsule->store->push(x, grads[0]);
    }
    return {input_grad, {}, {}};
  }
};

}  // namespace

void WeightGradientStore::push(at::Tensor input, at::Tensor output_grad) {
  const std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back({std::move(input), std::move(output_grad)});
}

std::size_t WeightGradientStore::flush(const at::Tensor& weight) {
  std::vector<Entry> entries;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries.swap(entries_);
  }
  at::NoGradGuard no_grad;
  for (const Entry& e : entries) {
    const at::Tensor dy = e.output_grad.reshape({-1, e.output_grad.size(-1)});
    const at::Tensor grad = dy.t().mm(e.input.reshape({-1, e.input.size(-1)}));
    at::Tensor w = weight;
    if (w.grad().defined())
      w.mutable_grad().add_(grad);
    else
      w.mutable_grad() = grad;
  }
  return entries.size();
}

std::size_t WeightGradientStore::pending() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

at::Tensor linear_deferring_weight(const at::Tensor& x, const at::Tensor& weight,
                                   const std::shared_ptr<WeightGradientStore>& store) {
  return LinearDeferringWeight::apply(x, weight, c10::make_intrusive<StoreCapsule>(store));
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  const std::shared_ptr<WeightGradientStore>& store) {
  if (!store) return at::linear(x, weight, bias);
  const at::Tensor y = linear_deferring_weight(x, weight, store);
  return bias.defined() ? y + bias : y;
}

}  // namespace chorus::train::detail
