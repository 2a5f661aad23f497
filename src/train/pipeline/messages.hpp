// Tensors between pipeline stages: point-to-point messages that carry their shape and dtype.
//
// A tensor travels as two messages on the pipeline group, both non-blocking: a fixed-size
// header (dtype, sending stage, rank count, sizes) with tag 2·tag, then the payload with tag
// 2·tag + 1. The receiver reads the header first and compares it with what it expects; on a
// mismatch it still takes the payload (so the sender's request completes and the sender is not
// left waiting) and then throws InvalidArgument naming both stages and both shapes. Each
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

/// Receives the tensor sent with `tag` by pipeline rank `peer`; InvalidArgument when its
/// sender, sizes or dtype differ from `expected`.
at::Tensor recv_tensor(const Group& pp, int peer, int tag, const ExpectedTensor& expected);

}  // namespace chorus::train::detail
