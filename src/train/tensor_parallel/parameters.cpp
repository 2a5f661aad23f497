// The tensor-parallel layers' shared pieces; see parameters.hpp.
#include "parameters.hpp"

#include <chorus/error.hpp>
#include <chorus/train/autograd.hpp>
#include <chorus/train/random.hpp>

#include <ATen/ATen.h>

#include <string>

namespace chorus::train::detail {

void require_features(const char* what, const char* name, std::int64_t value, int ranks,
                      const char* group) {
  require_argument(value >= 1, std::string(what) + ": " + name + " is " + std::to_string(value) +
                                   ", not positive");
  require_argument(value % ranks == 0, std::string(what) + ": " + name + " " +
                                           std::to_string(value) + " is not a multiple of the " +
                                           group + " group's " + std::to_string(ranks) + " ranks");
}

void require_last_dim(const char* what, const at::Tensor& x, std::int64_t expected) {
  require_argument(x.defined() && x.dim() >= 1,
                   std::string(what) + ": the input must be a defined tensor of at least 1-d");
  require_argument(x.size(-1) == expected, std::string(what) + ": the input's last dimension is " +
                                               std::to_string(x.size(-1)) + ", expected " +
                                               std::to_string(expected));
}

at::Tensor weight_slice(const ParameterInit& init, at::IntArrayRef full_shape, std::int64_t dim,
                        std::int64_t offset, std::int64_t length) {
  const std::string name = init.name + ".weight";
  const InitSpec spec{.seed = init.seed,
                      .name = name,
                      .kind = InitKind::Normal,
                      .scale = init.init_std,
                      .dtype = init.dtype};
  return init_slice(spec, full_shape, {{dim, offset, length}}).set_requires_grad(true);
}

at::Tensor zero_parameter(at::IntArrayRef shape, at::ScalarType dtype) {
  return at::zeros(shape, at::TensorOptions().dtype(dtype)).set_requires_grad(true);
}

at::Tensor column_parallel_input(const at::Tensor& x, const Group& tp, bool sequence_parallel,
                                 std::int64_t sequence_dim) {
  return sequence_parallel ? all_gather_along_dim(x, tp, sequence_dim) : copy_to_region(x, tp);
}

std::vector<at::Tensor> defined(std::initializer_list<at::Tensor> tensors) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : tensors)
    if (t.defined()) out.push_back(t);
  return out;
}

}  // namespace chorus::train::detail
