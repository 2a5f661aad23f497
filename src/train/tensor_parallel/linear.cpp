// Column- and row-parallel linear layers; see include/chorus/train/tensor_parallel.hpp.
//
// Column: y_r = x · W_rᵀ + b_r with W_r the r-th block of rows of W, so the y_r side by side
// are x · Wᵀ + b. Row: x · Wᵀ = Σ_r x_r · W_rᵀ with W_r the r-th block of columns of W and x_r
// the matching slice of x's last dimension, so the partial products are summed over the group
// and the bias, replicated, is added once after the sum. Under sequence parallelism the column
// layer keeps only its s/t input rows for backward (sequence_parallel_linear.hpp).
#include "deferred_weight.hpp"
#include "parameters.hpp"
#include "sequence_parallel_linear.hpp"

#include <chorus/train/autograd.hpp>
#include <chorus/train/tensor_parallel.hpp>

#include <ATen/ATen.h>

namespace chorus::train {

ColumnParallelLinear::ColumnParallelLinear(std::int64_t in_features, std::int64_t out_features,
                                           const Group& tp, const ParameterInit& init,
                                           const ColumnParallelOptions& options)
    : tp_(tp), options_(options) {
  const char* what = "ColumnParallelLinear";
  detail::require_features(what, "in_features", in_features, 1);
  detail::require_features(what, "out_features", out_features, tp.size(), tp.name.c_str());
  const std::int64_t rows = out_features / tp.size();
  weight_ = detail::weight_slice(init, {out_features, in_features}, 0, rows * tp.rank(), rows);
  if (options.bias) bias_ = detail::zero_parameter({rows}, init.dtype);
  if (options.defer_weight_gradient) deferred_ = std::make_shared<detail::WeightGradientStore>();
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) const {
  detail::require_last_dim("ColumnParallelLinear", x, weight_.size(1));
  at::Tensor y;
  if (options_.sequence_parallel) {
    // Keeps this rank's s/t input rows only; backward gathers them again.
    y = detail::sequence_parallel_linear(x, weight_, tp_, options_.sequence_dim, deferred_);
    if (bias_.defined()) y = y + bias_;
  } else {
    const at::Tensor input =
        detail::column_parallel_input(x, tp_, options_.sequence_parallel, options_.sequence_dim);
    y = detail::linear(input, weight_, bias_, deferred_);
  }
  return options_.gather_output ? gather_along_dim(y, tp_, -1) : y;
}

std::vector<at::Tensor> ColumnParallelLinear::parameters() const {
  return detail::defined({weight_, bias_});
}

std::size_t ColumnParallelLinear::compute_weight_gradients() const {
  return deferred_ ? deferred_->flush(weight_) : 0;
}

std::size_t ColumnParallelLinear::pending_weight_gradients() const {
  return deferred_ ? deferred_->pending() : 0;
}

RowParallelLinear::RowParallelLinear(std::int64_t in_features, std::int64_t out_features,
                                     const Group& tp, const ParameterInit& init,
                                     const RowParallelOptions& options)
    : tp_(tp), options_(options) {
  const char* what = "RowParallelLinear";
  detail::require_features(what, "in_features", in_features, tp.size(), tp.name.c_str());
  detail::require_features(what, "out_features", out_features, 1);
  require_argument(options.input_is_parallel || !options.sequence_parallel,
                   "RowParallelLinear: sequence_parallel needs input_is_parallel");
  const std::int64_t columns = in_features / tp.size();
  weight_ =
      detail::weight_slice(init, {out_features, in_features}, 1, columns * tp.rank(), columns);
  if (options.bias) bias_ = detail::zero_parameter({out_features}, init.dtype);
  if (options.defer_weight_gradient) deferred_ = std::make_shared<detail::WeightGradientStore>();
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) const {
  const std::int64_t columns = weight_.size(1);
  detail::require_last_dim("RowParallelLinear", x,
                           options_.input_is_parallel ? columns : columns * tp_.size());
  const at::Tensor input = options_.input_is_parallel ? x : split_along_dim(x, tp_, -1);
  const at::Tensor partial = detail::linear(input, weight_, {}, deferred_);
  const at::Tensor y = options_.sequence_parallel
                           ? reduce_scatter_along_dim(partial, tp_, options_.sequence_dim)
                           : reduce_from_region(partial, tp_);
  return bias_.defined() ? y + bias_ : y;
}

std::vector<at::Tensor> RowParallelLinear::parameters() const {
  return detail::defined({weight_, bias_});
}

std::size_t RowParallelLinear::compute_weight_gradients() const {
  return deferred_ ? deferred_->flush(weight_) : 0;
}

std::size_t RowParallelLinear::pending_weight_gradients() const {
  return deferred_ ? deferred_->pending() : 0;
}

std::vector<at::Tensor> RowParallelLinear::partial_gradient_parameters() const {
  if (!options_.sequence_parallel) return {};
  return detail::defined({bias_});
}

}  // namespace chorus::train
