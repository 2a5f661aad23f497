// Tensors between pipeline stages: point-to-point messages that carry their shape and dtype.
//
// A tensor travels as two messages on the pipeline group, both non-blocking: a fixed-size
// header (dtype, sending stage, rank count, sizes) with tag 2·tag, then the payload with tag
// 2·tag + 1. A receive is posted in two steps, so that it can be posted ahead of need: the
// header's receive first (its size is fixed), then, as soon as the header has arrived, the
// payload's at the size the header names (never at an expected size: a receive of another size
// than the message fails both sides). The receiver then compares the header with what it
// expects; on a mismatch it still takes the payload (so the sender's request completes and the
// sender is not left waiting) and then throws InvalidArgument naming both stages and both
// shapes. Each message is one ledger entry on the group (send or recv, the payload's bytes).
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

/// A receive in progress; its buffers live until finish_recv().
struct PendingRecv {
  int peer = 0;
  int tag = 0;
  ExpectedTensor expected;
  at::Tensor header, payload;  ///< payload: allocated when the header has arrived
  Request header_request, payload_request;
};

/// Posts the header's receive of the tensor sent with `tag` by pipeline rank `peer`.
PendingRecv post_recv(const Group& pp, int peer, int tag, const ExpectedTensor& expected);

/// Posts the payload's receive once the header has arrived (at the header's size); never blocks
/// unless `wait`, when it waits for the header. A malformed header posts nothing (finish_recv
/// names it).
void advance_recv(const Group& pp, PendingRecv& recv, bool wait = false);

/// Waits for `recv` and returns its tensor; InvalidArgument when its sender, sizes or dtype
/// differ from the expected ones.
at::Tensor finish_recv(const Group& pp, PendingRecv& recv);

}  // namespace chorus::train::detail
