// The tensor-parallel layers' shared pieces: parameter creation from init_slice, the checks of
// sizes (each failing with a sentence that names the numbers) and the column-parallel input.
#pragma once

#include <chorus/train/tensor_parallel.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace chorus::train::detail {

/// InvalidArgument unless `value` ≥ 1 and a multiple of `ranks` ("<what>: <name> 10 is not a
/// multiple of the tp group's 3 ranks"); `group` is the group's name when ranks > 1 matters.
void require_features(const char* what, const char* name, std::int64_t value, int ranks,
                      const char* group = "");
/// InvalidArgument unless `x` is defined, at least 1-d and its last dimension is `expected`.
void require_last_dim(const char* what, const at::Tensor& x, std::int64_t expected);

/// A parameter (requires grad): elements [offset, offset + length) along `dim` of the full
/// weight `full_shape` that `init` defines (Normal(0, init_std) keyed by name + ".weight").
at::Tensor weight_slice(const ParameterInit& init, at::IntArrayRef full_shape, std::int64_t dim,
                        std::int64_t offset, std::int64_t length);
/// A zero parameter of `shape`.
at::Tensor zero_parameter(at::IntArrayRef shape, at::ScalarType dtype);
/// The input of a column-parallel product: `x` through copy_to_region, or all-gathered along
/// `sequence_dim` under sequence parallelism (x then holds this rank's sequence slice).
at::Tensor column_parallel_input(const at::Tensor& x, const Group& tp, bool sequence_parallel,
                                 std::int64_t sequence_dim);
/// The defined tensors of `tensors`, in order.
std::vector<at::Tensor> defined(std::initializer_list<at::Tensor> tensors);

}  // namespace chorus::train::detail
