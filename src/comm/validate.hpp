// Argument checks done before anything is sent, so a bad call never leaves
// peers waiting. Pure functions of the call and the communicator's shape.
#pragma once

#include "algorithms/algorithm.hpp"

namespace chorus::detail {

/// Throws Error(InvalidArgument, sentence) for an unknown dtype/op, a root out of
/// range, a NULL buffer the call needs, counts whose byte size overflows, or
/// all-to-all-v count/displacement arrays that are missing or overflow, or whose count
/// this rank sends itself differs from the count it receives from itself.
void validate_collective(const algorithms::Call& args, int rank, int size);

/// The bytes a collective reads from its send buffer and writes to its receive buffer on
/// `rank` (0: that buffer may be NULL); zero for all-to-all-v and barrier. Throws
/// Error(InvalidArgument) when a size overflows. validate_collective refuses a NULL buffer
/// of more than 0 bytes.
struct BufferBytes {
  std::size_t send = 0;
  std::size_t recv = 0;
};
BufferBytes buffer_bytes(const algorithms::Call& args, int rank, int size);

/// The same for send/recv: `peer` must be another rank of the communicator.
void validate_point_to_point(Collective kind, const void* buf, std::size_t count, DataType dtype,
                             int peer, int rank, int size);

/// Point-to-point tags are >= 0 (InvalidArgument otherwise).
void validate_tag(Collective kind, int tag);

/// An any-source receive: the checks of a receive and its tag, and InvalidUsage on a
/// communicator of one rank (nobody could ever send to it).
void validate_recv_any(const void* buf, std::size_t count, DataType dtype, int tag, int size);

}  // namespace chorus::detail
