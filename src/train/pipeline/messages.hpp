// Tensors between pipeline stages: point-to-point messages that carry their shape and dtype.
//
// A tensor travels as two messages on the pipeline group, both non-blocking: a fixed-size
// header (dtype, sending stage, rank count, sizes) with tag 2·tag, then the payload with tag
// 2·tag + 1. The receiver posts both receives, the payload's at the size it expects (so it can
// post them ahead of need), then compares the header with what it expects; on a mismatch it
// still waits for the payload's receive and then throws InvalidArgument naming both stages and
// both shapes (the executor's abort releases a sender whose payload did not fit). Each
// message is one ledger entry on the group (send or recv, the payload's bytes).
#pragma once

#include <chorus/communicator.hpp>
#include <chorus/train/mesh.hpp>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::train::detail {

/// A send in flight; its buffers live until wait().
struct PendingSend {
  at::Tensor header, payload;
  Request header_request, payload_request;
  void wait() {
    header_request.wait();
    payload_request.wait();
  }
};

/// What a receiver expects, and how to name it in an error.
struct ExpectedTensor {
  std::string what;  ///< "activation" or "gradient"
  int micro_batch = 0;
  int from_stage = 0;  ///< the sender's virtual stage
  int to_stage = 0;    ///< the receiver's
  std::vector<std::int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
};

/// Starts sending `x` (contiguous CPU) from virtual stage `from_stage` to pipeline rank `peer`.
PendingSend send_tensor(const Group& pp, const at::Tensor& x, int peer, int tag, int from_stage);

/// A receive posted ahead of need: the header and the payload, sized as expected; its buffers
/// live until finish_recv().
struct PendingRecv {
  at::Tensor header, payload;
  Request header_request, payload_request;
  int peer = 0;
  ExpectedTensor expected;
};

/// Posts the receive of the tensor sent with `tag` by pipeline rank `peer`, expected as
/// `expected` (what a receiver knows before the message arrives).
PendingRecv post_recv(const Group& pp, int peer, int tag, const ExpectedTensor& expected);

/// Waits for `recv` and returns its tensor; InvalidArgument when its sender, sizes or dtype
/// differ from the expected ones (the payload's own receive, posted at the expected size, is
/// waited for first and its count mismatch, if any, ignored: the header names the difference).
at::Tensor finish_recv(const Group& pp, PendingRecv& recv);

/// post_recv() then finish_recv().
at::Tensor recv_tensor(const Group& pp, int peer, int tag, const ExpectedTensor& expected);

}  // namespace chorus::train::detail
