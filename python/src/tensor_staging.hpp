// How torch tensors travel through Chorus: element type, count and reduction
// operator on the wire, and contiguous staging buffers.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chorus/types.hpp>

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace chorus_torch {

/// A tensor's wire form: Chorus dtype and elements per tensor element
/// (2 for complex, which travels as (real, imaginary) pairs).
struct Wire {
  chorus::DataType dtype;
  std::size_t per_element;
  std::size_t count(const at::Tensor& t) const {
    return static_cast<std::size_t>(t.numel()) * per_element;
  }
};

/// Throws naming `op` unless `t` is a CPU tensor of a dtype Chorus carries.
Wire wire_of(const at::Tensor& t, const char* op);
/// The Chorus operator for `op` on tensors of `type`; throws for ops Chorus lacks
/// (BAND, BOR, BXOR, PREMUL_SUM) and for non-linear ops on complex tensors.
chorus::ReduceOp wire_op(const c10d::ReduceOp& op, at::ScalarType type, const char* name);
/// Throws unless `tensors` holds exactly one tensor.
void require_one(const std::vector<at::Tensor>& tensors, const char* op);
/// Throws unless every tensor has `type` and `numel` elements.
void require_like(const std::vector<at::Tensor>& tensors, at::ScalarType type, int64_t numel,
                  const char* op);

/// `t` when contiguous, else a contiguous copy (the buffer to send from).
at::Tensor contiguous_input(const at::Tensor& t);
/// `t` when contiguous, else a contiguous copy the result lands in first.
inline at::Tensor contiguous_output(const at::Tensor& t) { return contiguous_input(t); }
/// A step copying `staged` back into `target`; empty when they are the same tensor.
std::function<void()> copy_back(const at::Tensor& target, const at::Tensor& staged);

/// The tensors flattened and concatenated (all must share one dtype).
at::Tensor concat_flat(const std::vector<at::Tensor>& tensors);
/// Copies consecutive slices of the flat `source`, starting at element `offset`,
/// into `targets` (each slice has the target's element count). Returns the end offset.
int64_t split_flat(const at::Tensor& source, int64_t offset,
                   const std::vector<at::Tensor>& targets);
/// Prefix sums of `counts`: the displacement of each block.
std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts);

}  // namespace chorus_torch
