// Activation recomputation as an autograd function (libtorch's C++ API has no checkpointing).
//
// recomputed(fn, inputs, parameters) returns fn(inputs) but keeps none of fn's intermediate
// tensors: forward runs fn with autograd off and saves only `inputs`; backward runs fn again on
// them with autograd on and differentiates that graph with respect to the inputs and
// `parameters` (the tensors fn reads besides its inputs whose gradients are wanted), returning
// those gradients to the outer graph, which accumulates them as for any other node. So the
// gradients are those of fn without recomputation, computed by the same operations on the same
// values, at the price of a second forward of fn. fn must compute the same values and issue the
// same collectives each time it runs: its dropout masks are pure functions of their key
// (random.hpp), so they replay without being stored.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace chorus::train::detail {

using Recomputable = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

at::Tensor recomputed(Recomputable fn, const std::vector<at::Tensor>& inputs,
                      const std::vector<at::Tensor>& parameters);

}  // namespace chorus::train::detail
