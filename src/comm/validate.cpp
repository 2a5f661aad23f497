#include "comm/validate.hpp"

#include <chorus/error.hpp>

#include <string>

namespace chorus::detail {
namespace {

constexpr std::size_t kMaxBytes = std::size_t{1} << 56;  // far beyond any real buffer

std::string name_of(Collective c) { return std::string(to_string(c)); }

// The checks run on every call: their failure paths stay out of line.
[[noreturn, gnu::cold, gnu::noinline]] void fail_too_large(Collective c, std::size_t count) {
  throw Error(Status::InvalidArgument, name_of(c) + ": count " + std::to_string(count) +
                                           " is too large (the buffer size overflows)");
}

[[noreturn, gnu::cold, gnu::noinline]] void fail_null(Collective c, const char* which,
                                                      std::size_t bytes) {
  throw Error(Status::InvalidArgument, name_of(c) + ": " + which + " is NULL but the call moves " +
                                           std::to_string(bytes) + " bytes");
}

/// Bytes of `count` elements of `element_bytes` times `blocks`, or an InvalidArgument when
/// it overflows.
std::size_t checked_bytes(Collective c, std::size_t count, std::size_t element_bytes,
                          std::size_t blocks) {
  std::size_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(count, blocks, &elements) ||
      __builtin_mul_overflow(elements, element_bytes, &bytes) || bytes > kMaxBytes) {
    fail_too_large(c, count);
  }
  return bytes;
}

std::size_t checked_bytes(Collective c, std::size_t count, DataType dtype, std::size_t blocks) {
  return checked_bytes(c, count, dtype_size(dtype), blocks);
}

void require_buffer(Collective c, const void* buf, const char* which, std::size_t bytes) {
  if (bytes > 0 && buf == nullptr) fail_null(c, which, bytes);
}

void check_root(Collective c, int root, int size) {
  if (root < 0 || root >= size) {
    throw Error(Status::InvalidArgument, name_of(c) + ": root " + std::to_string(root) +
                                             " is not a rank of this communicator (size " +
                                             std::to_string(size) + ")");
  }
}

/// What a rank sends itself must be what it receives from itself: only this rank can check
/// it, so it is checked here, before the call is numbered and queued.
void check_self_block(const algorithms::Call& a, int rank) {
  const auto r = static_cast<std::size_t>(rank);
  if (a.send_counts[r] == a.recv_counts[r]) return;
  throw Error(Status::InvalidArgument, "alltoallv: rank " + std::to_string(rank) + " sends " +
                                           std::to_string(a.send_counts[r]) +
                                           " elements to itself but expects " +
                                           std::to_string(a.recv_counts[r]));
}

void check_all_to_all_v(const algorithms::Call& a, int rank, int size) {
  auto n = static_cast<std::size_t>(size);
  if (a.send_counts.size() != n || a.send_displs.size() != n || a.recv_counts.size() != n ||
      a.recv_displs.size() != n || a.send_counts.data() == nullptr ||
      a.send_displs.data() == nullptr || a.recv_counts.data() == nullptr ||
      a.recv_displs.data() == nullptr) {
    throw Error(
        Status::InvalidArgument,
        "alltoallv: sendcounts, sdispls, recvcounts and rdispls must each hold one entry per rank");
  }
  std::size_t send_bytes = 0, recv_bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t end = 0;
    if (__builtin_add_overflow(a.send_displs[i], a.send_counts[i], &end)) end = SIZE_MAX;
    send_bytes += checked_bytes(a.collective, a.send_counts[i], a.dtype, 1);
    checked_bytes(a.collective, end, a.dtype, 1);
    if (__builtin_add_overflow(a.recv_displs[i], a.recv_counts[i], &end)) end = SIZE_MAX;
    recv_bytes += checked_bytes(a.collective, a.recv_counts[i], a.dtype, 1);
    checked_bytes(a.collective, end, a.dtype, 1);
  }
  require_buffer(a.collective, a.send, "sendbuf", send_bytes);
  require_buffer(a.collective, a.recv, "recvbuf", recv_bytes);
  check_self_block(a, rank);
}

void check_buffers(const algorithms::Call& a, int rank, int size) {
  const BufferBytes bytes = buffer_bytes(a, rank, size);
  require_buffer(a.collective, a.send, "sendbuf", bytes.send);
  require_buffer(a.collective, a.recv, "recvbuf", bytes.recv);
}

}  // namespace

BufferBytes buffer_bytes(const algorithms::Call& a, int rank, int size) {
  auto n = static_cast<std::size_t>(size);
  const bool is_root = rank == a.root;
  const std::size_t element_bytes = dtype_size(a.dtype);
  const std::size_t one = checked_bytes(a.collective, a.count, element_bytes, 1);
  const std::size_t all = checked_bytes(a.collective, a.count, element_bytes, n);
  switch (a.collective) {
    case Collective::AllReduce:
      return {one, one};
    case Collective::Broadcast:
      return {is_root ? one : 0, one};
    case Collective::Reduce:
      return {one, is_root ? one : 0};
    case Collective::AllGather:
      return {one, all};
    case Collective::ReduceScatter:
      return {all, one};
    case Collective::Gather:
      return {one, is_root ? all : 0};
    case Collective::Scatter:
      return {is_root ? all : 0, one};
    case Collective::AllToAll:
      return {all, all};
    default:
      return {};
  }
}

void validate_collective(const algorithms::Call& args, int rank, int size) {
  const Collective c = args.collective;
  if (c != Collective::Barrier && !is_valid(args.dtype)) {
    throw Error(Status::InvalidArgument, name_of(c) + ": unknown dtype value " +
                                             std::to_string(static_cast<int>(args.dtype)));
  }
  if (has_reduce_op(c) && !is_valid(args.op)) {
    throw Error(Status::InvalidArgument, name_of(c) + ": unknown reduce op value " +
                                             std::to_string(static_cast<int>(args.op)));
  }
  if (has_root(c)) check_root(c, args.root, size);
  if (c == Collective::AllToAllV) return check_all_to_all_v(args, rank, size);
  check_buffers(args, rank, size);
}

void validate_point_to_point(Collective kind, const void* buf, std::size_t count, DataType dtype,
                             int peer, int rank, int size) {
  if (!is_valid(dtype)) {
    throw Error(Status::InvalidArgument,
                name_of(kind) + ": unknown dtype value " + std::to_string(static_cast<int>(dtype)));
  }
  if (peer < 0 || peer >= size || peer == rank) {
    throw Error(Status::InvalidArgument, name_of(kind) + ": peer " + std::to_string(peer) +
                                             " is not another rank of this communicator (rank " +
                                             std::to_string(rank) + " of " + std::to_string(size) +
                                             ")");
  }
  require_buffer(kind, buf, "buf", checked_bytes(kind, count, dtype, 1));
}

void validate_tag(Collective kind, int tag) {
  if (tag < 0) {
    throw Error(Status::InvalidArgument,
                name_of(kind) + ": tag " + std::to_string(tag) + " is negative (tags are >= 0)");
  }
}

void validate_recv_any(const void* buf, std::size_t count, DataType dtype, int tag, int size) {
  const Collective kind = Collective::Recv;
  if (!is_valid(dtype)) {
    throw Error(Status::InvalidArgument, "recv from any source: unknown dtype value " +
                                             std::to_string(static_cast<int>(dtype)));
  }
  validate_tag(kind, tag);
  require_buffer(kind, buf, "buf", checked_bytes(kind, count, dtype, 1));
  if (size < 2) {
    throw Error(Status::InvalidUsage,
                "recv from any source on a communicator of 1 rank: no other rank can send");
  }
}

}  // namespace chorus::detail
