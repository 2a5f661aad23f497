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
  PendingRecv out{peer, tag, e, at::empty({kHeader}, at::kLong), {}, {}, {}};
  Communicator comm = pp.comm;
  out.header_request = comm.irecv(out.header.data_ptr(), kHeader, DataType::Int64, peer, 2 * tag);
  return out;
}

namespace {

// The header's lengths are checked before they are used.
bool valid_header(const std::int64_t* h) {
  return h[0] >= 0 && h[0] < static_cast<std::int64_t>(at::ScalarType::NumOptions) && h[2] >= 0 &&
         h[2] <= kMaxDims &&
         std::all_of(h + 3, h + 3 + h[2], [](std::int64_t n) { return n >= 0; });
}

}  // namespace

void advance_recv(const Group& pp, PendingRecv& r, bool wait) {
  if (r.payload_request.valid()) return;
  if (wait)
    r.header_request.wait();
  else if (!r.header_request.test())
    return;
  const auto* h = r.header.data_ptr<std::int64_t>();
  if (!valid_header(h)) return;
  const auto dtype = static_cast<at::ScalarType>(h[0]);
  r.payload = at::empty(std::vector<std::int64_t>(h + 3, h + 3 + h[2]), at::dtype(dtype));
  Communicator comm = pp.comm;
  r.payload_request = comm.irecv(r.payload.data_ptr(), r.payload.numel(),
                                 chorus_dtype(dtype, "pipeline recv"), r.peer, 2 * r.tag + 1);
}

at::Tensor finish_recv(const Group& pp, PendingRecv& r) {
  const ExpectedTensor& e = r.expected;
  advance_recv(pp, r, true);
  require_argument(r.payload_request.valid(),
                   "pipeline: stage " + std::to_string(e.to_stage) +
                       " received a malformed tensor header from pipeline rank " +
                       std::to_string(r.peer));
  r.payload_request.wait();
  pp.record(CollectiveKind::Recv, r.payload.nbytes());
  const std::int64_t from = r.header.data_ptr<std::int64_t>()[1];
  const at::ScalarType dtype = r.payload.scalar_type();
  const bool same =
      from == e.from_stage && dtype == e.dtype && r.payload.sizes() == at::IntArrayRef(e.sizes);
  require_argument(same, "pipeline: stage " + std::to_string(e.to_stage) + " expects the " +
                             e.what + " of micro-batch " + std::to_string(e.micro_batch) +
                             " from stage " + std::to_string(e.from_stage) + " as " +
                             shape(e.dtype, e.sizes) + "; stage " + std::to_string(from) +
                             " sent " + shape(dtype, r.payload.sizes()));
  return r.payload;
}

}  // namespace chorus::train::detail
