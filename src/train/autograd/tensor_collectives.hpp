// Collectives on whole tensors along a dimension, each recorded in the group's ledger: the
// building blocks of the autograd functions (autograd.hpp), without autograd.
//
// Every function returns a new contiguous tensor and never modifies its input. On a group of
// one rank nothing is issued or recorded. `what` names the public function in error sentences.
#pragma once

#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace chorus::train::detail {

/// The element-wise `op` (sum, max, ...) of every rank's `x`.
at::Tensor all_reduce(const Group& group, const at::Tensor& x, ReduceOp op);
/// The sum of every rank's `x`.
inline at::Tensor all_reduce_sum(const Group& group, const at::Tensor& x) {
  return all_reduce(group, x, ReduceOp::Sum);
}
/// The ranks' `x` concatenated along `dim` in group-rank order.
at::Tensor all_gather_along(const Group& group, const at::Tensor& x, std::int64_t dim,
                            const char* what);
/// This rank's slice along `dim` of the sum of every rank's `x`.
at::Tensor reduce_scatter_along(const Group& group, const at::Tensor& x, std::int64_t dim,
                                const char* what);
/// This rank's slice of `x` along `dim` (no communication).
at::Tensor own_slice(const Group& group, const at::Tensor& x, std::int64_t dim, const char* what);
/// Slice i of `x` along `scatter_dim` goes to rank i; what rank i sent is concatenated along
/// `gather_dim` at position i.
at::Tensor all_to_all_along(const Group& group, const at::Tensor& x, std::int64_t scatter_dim,
                            std::int64_t gather_dim, const char* what);
/// Rows of `x` (dimension 0) exchanged unevenly: the first send_rows[0] rows go to rank 0, the
/// next send_rows[1] to rank 1, ...; the result holds recv_rows[i] rows from rank i, in rank
/// order. Counts are per rank of the group and must match the peers' (the all-to-all-v's rule).
/// Recorded as one all_to_all_v of x's bytes; on a group of one rank, a copy of x.
at::Tensor all_to_all_v_rows(const Group& group, const at::Tensor& x,
                             const std::vector<std::int64_t>& send_rows,
                             const std::vector<std::int64_t>& recv_rows, const char* what);

/// `count` zeros of `type` in comm's shared memory (Communicator::alloc_shared: collective),
/// freed when the tensor goes; in ordinary memory when the host's shared memory cannot hold
/// them (every rank then falls back alike). Buffers whose collectives run in the peers' memory.
at::Tensor shared_zeros(Communicator comm, std::int64_t count, at::ScalarType type);

/// The Chorus element type of `type`, else InvalidArgument naming `what`.
DataType chorus_dtype(at::ScalarType type, const char* what);

/// `dim` in [-x.dim(), x.dim()) made non-negative, else InvalidArgument naming `what`.
std::int64_t checked_dim(const at::Tensor& x, std::int64_t dim, const char* what);

}  // namespace chorus::train::detail
