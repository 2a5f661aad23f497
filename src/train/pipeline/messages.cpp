// Tensors between pipeline stages; see messages.hpp.
#include "messages.hpp"

#include "../autograd/tensor_collectives.hpp"

#include <chorus/error.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

namespace chorus::train::detail {
namespace {

constexpr std::int64_t kMaxDims = 8;
constexpr std::int64_t kHeader = 3 + kMaxDims;  // dtype, sending stage, dims, sizes

std::string shape(at::ScalarType dtype, at::IntArrayRef sizes) {
  std::string out = std::string(c10::toString(dtype)) + " [";
  for (std::size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

}  // namespace

PendingSend send_tensor(const Group& pp, const at::Tensor& x, int peer, int tag, int from_stage) {
  PendingSend out;
  out.payload = x.detach().contiguous();
  require_argument(out.payload.dim() <= kMaxDims,
                   "pipeline: a " + std::to_string(out.payload.dim()) +
                       "-dimensional tensor between stages; at most " + std::to_string(kMaxDims));
  const DataType dtype = chorus_dtype(out.payload.scalar_type(), "pipeline send");
  out.header = at::zeros({kHeader}, at::kLong);
  auto* h = out.header.data_ptr<std::int64_t>();
  h[0] = static_cast<std::int64_t>(out.payload.scalar_type());
  h[1] = from_stage;
  h[2] = out.payload.dim();
  for (std::int64_t d = 0; d < out.payload.dim(); ++d) h[3 + d] = out.payload.size(d);
  Communicator comm = pp.comm;
  out.header_request = comm.isend(h, kHeader, DataType::Int64, peer, 2 * tag);
  out.payload_request =
      comm.isend(out.payload.data_ptr(), out.payload.numel(), dtype, peer, 2 * tag + 1);
  pp.record(CollectiveKind::Send, out.payload.nbytes());
  return out;
}

at::Tensor recv_tensor(const Group& pp, int peer, int tag, const ExpectedTensor& e) {
  Communicator comm = pp.comm;
  at::Tensor header = at::empty({kHeader}, at::kLong);
  comm.irecv(header.data_ptr(), kHeader, DataType::Int64, peer, 2 * tag).wait();
  const auto* h = header.data_ptr<std::int64_t>();
  // The header's lengths are checked before they are used.
  const bool valid = h[0] >= 0 && h[0] < static_cast<std::int64_t>(at::ScalarType::NumOptions) &&
                     h[2] >= 0 && h[2] <= kMaxDims &&
                     std::all_of(h + 3, h + 3 + h[2], [](std::int64_t n) { return n >= 0; });
  require_argument(valid, "pipeline: stage " + std::to_string(e.to_stage) +
                              " received a malformed tensor header from pipeline rank " +
                              std::to_string(peer));
  const auto dtype = static_cast<at::ScalarType>(h[0]);
  const std::int64_t from = h[1];
  const std::vector<std::int64_t> sizes(h + 3, h + 3 + h[2]);
  at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(dtype));
  comm.irecv(out.data_ptr(), out.numel(), chorus_dtype(dtype, "pipeline recv"), peer, 2 * tag + 1)
      .wait();
  pp.record(CollectiveKind::Recv, out.nbytes());
  const bool same =
      from == e.from_stage && dtype == e.dtype && out.sizes() == at::IntArrayRef(e.sizes);
  require_argument(same, "pipeline: stage " + std::to_string(e.to_stage) + " expects the " +
                             e.what + " of micro-batch " + std::to_string(e.micro_batch) +
                             " from stage " + std::to_string(e.from_stage) + " as " +
                             shape(e.dtype, e.sizes) + "; stage " + std::to_string(from) +
                             " sent " + shape(dtype, sizes));
  return out;
}

}  // namespace chorus::train::detail
