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

PendingRecv post_recv(const Group& pp, int peer, int tag, const ExpectedTensor& e) {
  Communicator comm = pp.comm;
  PendingRecv out;
  out.peer = peer;
  out.expected = e;
  out.header = at::empty({kHeader}, at::kLong);
  out.payload = at::empty(e.sizes, at::TensorOptions().dtype(e.dtype));
  out.header_request = comm.irecv(out.header.data_ptr(), kHeader, DataType::Int64, peer, 2 * tag);
  out.payload_request = comm.irecv(out.payload.data_ptr(), out.payload.numel(),
                                   chorus_dtype(e.dtype, "pipeline recv"), peer, 2 * tag + 1);
  return out;
}

at::Tensor finish_recv(const Group& pp, PendingRecv& r) {
  const ExpectedTensor& e = r.expected;
  r.header_request.wait();
  const auto* h = r.header.data_ptr<std::int64_t>();
  // The header's lengths are checked before they are used.
  const bool valid = h[0] >= 0 && h[0] < static_cast<std::int64_t>(at::ScalarType::NumOptions) &&
                     h[2] >= 0 && h[2] <= kMaxDims &&
                     std::all_of(h + 3, h + 3 + h[2], [](std::int64_t n) { return n >= 0; });
  require_argument(valid, "pipeline: stage " + std::to_string(e.to_stage) +
                              " received a malformed tensor header from pipeline rank " +
                              std::to_string(r.peer));
  const auto dtype = static_cast<at::ScalarType>(h[0]);
  const std::int64_t from = h[1];
  const std::vector<std::int64_t> sizes(h + 3, h + 3 + h[2]);
  const bool same = from == e.from_stage && dtype == e.dtype && sizes == e.sizes;
  if (!same) {
    try {
      r.payload_request.wait();
    } catch (const Error&) {  // a payload of another count: the sentence below says which
    }
  }
  require_argument(same, "pipeline: stage " + std::to_string(e.to_stage) + " expects the " +
                             e.what + " of micro-batch " + std::to_string(e.micro_batch) +
                             " from stage " + std::to_string(e.from_stage) + " as " +
                             shape(e.dtype, e.sizes) + "; stage " + std::to_string(from) +
                             " sent " + shape(dtype, sizes));
  r.payload_request.wait();
  pp.record(CollectiveKind::Recv, r.payload.nbytes());
  return r.payload;
}

at::Tensor recv_tensor(const Group& pp, int peer, int tag, const ExpectedTensor& e) {
  PendingRecv r = post_recv(pp, peer, tag, e);
  return finish_recv(pp, r);
}

}  // namespace chorus::train::detail
