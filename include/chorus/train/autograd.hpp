// The communicating autograd functions of model parallelism (Megatron's mappings).
//
// Each is a torch::autograd::Function over one mesh Group: a collective in forward, its adjoint
// in backward. In the diagrams below, "replicated" means every rank of the group holds the same
// tensor, "partial" that the true value is the sum of the ranks' tensors, and "sharded(d)" that
// rank i holds the i-th of the group's equal slices along dimension d.
//
//   copy_to_region             replicated -> replicated      fwd identity   bwd all-reduce
//   reduce_from_region         partial -> replicated         fwd all-reduce bwd identity
//   gather_along_dim(d)        sharded(d) -> replicated      fwd all-gather bwd keep own slice
//   split_along_dim(d)         replicated -> sharded(d)      fwd own slice  bwd all-gather
//   reduce_scatter_along_dim   partial -> sharded(d)         fwd reduce-scatter  bwd all-gather
//   all_gather_along_dim(d)    sharded(d) -> replicated,     fwd all-gather bwd reduce-scatter
//                              whose consumers differ per rank (sequence parallelism)
//   sequence_to_heads          [s/u, heads, ...] -> [s, heads/u, ...]   fwd/bwd all-to-all
//   heads_to_sequence          its inverse (Ulysses context parallelism)
//   all_to_all_v_rows          rows exchanged unevenly   fwd all-to-all-v  bwd the reverse one
//                              (MoE dispatch and combine)
//
// gather_along_dim and all_gather_along_dim compute the same forward; they differ in what the
// gradient arriving in backward is: the same on every rank (a replicated loss downstream: keep
// the own slice) or a per-rank partial (reduce-scatter it).
//
// Every collective is recorded in the group's ledger, one entry per call (ledger.hpp); on a
// group of one rank every function is the identity (or the whole tensor) and nothing is issued
// or recorded. Tensors are CPU and of a dtype Chorus reduces (fp32, fp64, fp16, bf16, int32,
// int64, int8, uint8); a dimension a function splits must be a multiple of the group size.
// Violations throw chorus::Error(InvalidArgument) naming the sizes, on every rank alike when the
// ranks' shapes agree.
#pragma once

#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace chorus::train {

at::Tensor copy_to_region(const at::Tensor& x, const Group& group);
at::Tensor reduce_from_region(const at::Tensor& x, const Group& group);
at::Tensor gather_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim);
at::Tensor split_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim);
at::Tensor reduce_scatter_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim);
at::Tensor all_gather_along_dim(const at::Tensor& x, const Group& group, std::int64_t dim);
/// Ulysses: the local piece of the sequence with every head becomes the whole sequence with
/// this rank's heads (heads sharded in group-rank order).
at::Tensor sequence_to_heads(const at::Tensor& x, const Group& group, std::int64_t seq_dim = 0,
                             std::int64_t head_dim = 1);
at::Tensor heads_to_sequence(const at::Tensor& x, const Group& group, std::int64_t seq_dim = 0,
                             std::int64_t head_dim = 1);

/// Rows (dimension 0) exchanged unevenly: the first send_rows[0] rows of x go to rank 0, the
/// next send_rows[1] to rank 1, ...; the result holds recv_rows[i] rows from rank i in rank
/// order. The counts must agree with the peers' (what rank i sends to j is what j receives
/// from i). Backward sends the gradient back the same way (counts swapped).
at::Tensor all_to_all_v_rows(const at::Tensor& x, const Group& group,
                             const std::vector<std::int64_t>& send_rows,
                             const std::vector<std::int64_t>& recv_rows);

}  // namespace chorus::train
