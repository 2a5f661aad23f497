// Tensor collectives along a dimension; see tensor_collectives.hpp.
//
// Chorus's all-gather, reduce-scatter and all-to-all work on flat buffers laid out rank-major.
// A slicing along `dim` therefore goes through a stacked buffer [ranks, slice...]: stacking
// the slices of `x` along `dim` gives the send buffer, and concatenating the received rows
// along `dim` gives the result.
#include "tensor_collectives.hpp"

#include <ATen/ATen.h>

#include <cstring>
#include <string>

namespace chorus::train::detail {

// `count` zeros of `type` in comm's shared memory (collective), freed when the tensor goes;
// in ordinary memory when the host's shared memory cannot hold them (the memory limit): that
// failure reaches every rank alike (alloc_shared agrees on it), so all fall back together.
at::Tensor shared_zeros(chorus::Communicator comm, std::int64_t count, at::ScalarType type) {
  const std::size_t bytes = static_cast<std::size_t>(count) * c10::elementSize(type);
  void* data = nullptr;
  try {
    data = comm.alloc_shared(bytes);
  } catch (const Error& e) {
    if (e.status() != Status::SystemError) throw;
  }
  if (!data) return at::zeros({count}, at::TensorOptions().dtype(type));
  std::memset(data, 0, bytes);
  return at::from_blob(
      data, {count},
      [comm](void* p) mutable {
        try {
          comm.free_shared(p);
        } catch (const std::exception&) {
          // Only a pointer alloc_shared did not return throws; this one it did.
        }
      },
      at::TensorOptions().dtype(type));
}

DataType chorus_dtype(at::ScalarType type, const char* what) {
  switch (type) {
    case at::kFloat:
      return DataType::Float32;
    case at::kDouble:
      return DataType::Float64;
    case at::kHalf:
      return DataType::Float16;
    case at::kBFloat16:
      return DataType::Bfloat16;
    case at::kInt:
      return DataType::Int32;
    case at::kLong:
      return DataType::Int64;
    case at::kChar:
      return DataType::Int8;
    case at::kByte:
      return DataType::Uint8;
    default:
      break;
  }
  throw Error(Status::InvalidArgument, std::string(what) + ": Chorus has no collective for " +
                                           std::string(c10::toString(type)) + " tensors");
}

namespace {

DataType chorus_dtype(const at::Tensor& x, const char* what) {
  return detail::chorus_dtype(x.scalar_type(), what);
}

/// `x` as a contiguous CPU tensor Chorus can send.
at::Tensor sendable(const at::Tensor& x, const char* what) {
  require_argument(x.defined(), std::string(what) + ": the tensor is undefined");
  require_argument(x.device().is_cpu(),
                   std::string(what) + ": the tensor is on " + x.device().str() + ", not the CPU");
  chorus_dtype(x, what);
  return x.contiguous();
}

/// The length of one rank's slice of `x` along `dim`.
std::int64_t slice_length(const Group& group, const at::Tensor& x, std::int64_t dim,
                          const char* what) {
  const std::int64_t n = x.size(dim);
  require_argument(n % group.size() == 0,
                   std::string(what) + ": dimension " + std::to_string(dim) + " has size " +
                       std::to_string(n) + ", not a multiple of the " + group.name + " group's " +
                       std::to_string(group.size()) + " ranks");
  return n / group.size();
}

/// The slices of `x` along `dim`, one per rank, stacked: [ranks, slice...], contiguous.
at::Tensor stacked_slices(const Group& group, const at::Tensor& x, std::int64_t dim,
                          const char* what) {
  slice_length(group, x, dim, what);
  return at::stack(x.chunk(group.size(), dim));
}

at::Tensor concat_rows(const at::Tensor& rows, std::int64_t dim) {
  return at::cat(rows.unbind(0), dim);
}

}  // namespace

std::int64_t checked_dim(const at::Tensor& x, std::int64_t dim, const char* what) {
  const std::int64_t rank = x.dim();
  require_argument(dim >= -rank && dim < rank, std::string(what) + ": dimension " +
                                                   std::to_string(dim) + " is outside a " +
                                                   std::to_string(rank) + "-d tensor");
  return dim < 0 ? dim + rank : dim;
}

at::Tensor all_reduce(const Group& group, const at::Tensor& x, ReduceOp op) {
  at::Tensor out = sendable(x, "all_reduce").clone();
  if (group.size() == 1) return out;
  group.record(CollectiveKind::AllReduce, out.nbytes());
  Communicator comm = group.comm;
  comm.all_reduce(out.data_ptr(), out.data_ptr(), out.numel(), chorus_dtype(out, "all_reduce"), op);
  return out;
}

at::Tensor all_gather_along(const Group& group, const at::Tensor& x, std::int64_t dim,
                            const char* what) {
  at::Tensor local = sendable(x, what);
  dim = checked_dim(local, dim, what);
  if (group.size() == 1) return local.clone();
  std::vector<std::int64_t> shape = local.sizes().vec();
  shape.insert(shape.begin(), group.size());
  at::Tensor rows = at::empty(shape, local.options());
  group.record(CollectiveKind::AllGather, rows.nbytes());
  Communicator comm = group.comm;
  comm.all_gather(local.data_ptr(), rows.data_ptr(), local.numel(), chorus_dtype(local, what));
  return concat_rows(rows, dim);
}

at::Tensor reduce_scatter_along(const Group& group, const at::Tensor& x, std::int64_t dim,
                                const char* what) {
  at::Tensor full = sendable(x, what);
  dim = checked_dim(full, dim, what);
  at::Tensor rows = stacked_slices(group, full, dim, what);
  if (group.size() == 1) return rows[0];
  at::Tensor out = at::empty_like(rows[0]);
  group.record(CollectiveKind::ReduceScatter, full.nbytes());
  Communicator comm = group.comm;
  comm.reduce_scatter(rows.data_ptr(), out.data_ptr(), out.numel(), chorus_dtype(out, what),
                      ReduceOp::Sum);
  return out;
}

at::Tensor own_slice(const Group& group, const at::Tensor& x, std::int64_t dim, const char* what) {
  at::Tensor full = sendable(x, what);
  dim = checked_dim(full, dim, what);
  const std::int64_t part = slice_length(group, full, dim, what);
  return full.narrow(dim, group.rank() * part, part).clone(at::MemoryFormat::Contiguous);
}

at::Tensor all_to_all_along(const Group& group, const at::Tensor& x, std::int64_t scatter_dim,
                            std::int64_t gather_dim, const char* what) {
  at::Tensor local = sendable(x, what);
  scatter_dim = checked_dim(local, scatter_dim, what);
  gather_dim = checked_dim(local, gather_dim, what);
  at::Tensor rows = stacked_slices(group, local, scatter_dim, what);
  if (group.size() == 1) return rows[0];
  at::Tensor received = at::empty_like(rows);
  group.record(CollectiveKind::AllToAll, local.nbytes());
  Communicator comm = group.comm;
  comm.all_to_all(rows.data_ptr(), received.data_ptr(), rows[0].numel(), chorus_dtype(local, what));
  return concat_rows(received, gather_dim);
}

namespace {

/// Element counts and their displacements from per-rank row counts of `row` elements each.
struct Layout {
  std::vector<std::size_t> counts, displs;
  std::int64_t rows = 0;
};

Layout element_layout(const std::vector<std::int64_t>& rows, std::int64_t row, int ranks,
                      const char* what) {
  require_argument(static_cast<int>(rows.size()) == ranks,
                   std::string(what) + ": " + std::to_string(rows.size()) +
                       " row counts for a group of " + std::to_string(ranks) + " ranks");
  Layout out;
  for (std::int64_t n : rows) {
    require_argument(n >= 0, std::string(what) + ": negative row count " + std::to_string(n));
    out.counts.push_back(static_cast<std::size_t>(n * row));
    out.displs.push_back(static_cast<std::size_t>(out.rows * row));
    out.rows += n;
  }
  return out;
}

}  // namespace

at::Tensor all_to_all_v_rows(const Group& group, const at::Tensor& x,
                             const std::vector<std::int64_t>& send_rows,
                             const std::vector<std::int64_t>& recv_rows, const char* what) {
  at::Tensor local = sendable(x, what);
  require_argument(local.dim() >= 1, std::string(what) + ": a 0-d tensor has no rows");
  std::int64_t row = 1;
  for (std::int64_t d = 1; d < local.dim(); ++d) row *= local.size(d);
  const Layout send = element_layout(send_rows, row, group.size(), what);
  const Layout recv = element_layout(recv_rows, row, group.size(), what);
  require_argument(send.rows == local.size(0),
                   std::string(what) + ": the send counts add up to " + std::to_string(send.rows) +
                       " rows, the tensor has " + std::to_string(local.size(0)));
  if (group.size() == 1) return local.clone();
  std::vector<std::int64_t> shape = local.sizes().vec();
  shape[0] = recv.rows;
  at::Tensor out = at::empty(shape, local.options());
  group.record(CollectiveKind::AllToAllV, local.nbytes());
  Communicator comm = group.comm;
  comm.all_to_all_v(local.data_ptr(), send.counts, send.displs, out.data_ptr(), recv.counts,
                    recv.displs, chorus_dtype(local, what));
  return out;
}

}  // namespace chorus::train::detail
