// Drawing and checking random collectives (see random_ops.hpp).
#include "random_ops.hpp"

#include "reference.hpp"

#include <cmath>
#include <vector>

namespace chorus::faults {
namespace {

using testing::decode;
using testing::encode;
using testing::expected_reduction;
using testing::make_input;
using Bytes = std::vector<unsigned char>;

constexpr DataType kTypes[] = {
    DataType::Int8,   DataType::Uint8,   DataType::Int32,    DataType::Uint32,  DataType::Int64,
    DataType::Uint64, DataType::Float16, DataType::Bfloat16, DataType::Float32, DataType::Float64};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min,
                             ReduceOp::Avg};
constexpr const char* kKindNames[] = {"allreduce",     "broadcast", "reduce",  "allgather",
                                      "reducescatter", "gather",    "scatter", "alltoall",
                                      "alltoallv",     "barrier",   "sendrecv"};

/// Element i of the block that `source` moves (key: the source rank, or a (source,
/// destination) pair): below 97, so every dtype holds it exactly, and blocks of
/// different keys below 97 differ in every element (31 is invertible mod 97).
double moved_value(std::size_t key, std::size_t i, std::uint32_t salt) {
  return static_cast<double>((key * 31 + i * 7 + salt) % 97);
}

/// A buffer of `count` elements of the block `key`.
Bytes moved_block(std::size_t key, std::size_t count, const OpSpec& s) {
  Bytes buf(count * dtype_size(s.dtype));
  for (std::size_t i = 0; i < count; ++i) {
    encode(moved_value(key, i, s.salt), s.dtype, buf.data() + i * dtype_size(s.dtype));
  }
  return buf;
}

/// Wrong elements of `buf` from element `first` on: `count` elements of block `key`.
std::size_t count_wrong(const Bytes& buf, std::size_t first, std::size_t key, std::size_t count,
                        const OpSpec& s) {
  std::size_t wrong = 0;
  const std::size_t width = dtype_size(s.dtype);
  for (std::size_t i = 0; i < count; ++i) {
    wrong += decode(s.dtype, buf.data() + (first + i) * width) != moved_value(key, i, s.salt);
  }
  return wrong;
}

/// Wrong elements of `buf`: element i must be the reduction of element first_index + i.
std::size_t count_wrong_reduced(const Bytes& buf, int n, std::size_t first_index, std::size_t count,
                                const OpSpec& s) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double got = decode(s.dtype, buf.data() + i * dtype_size(s.dtype));
    wrong += got != expected_reduction(n, first_index + i, s.dtype, s.op);
  }
  return wrong;
}

std::size_t run_reduction(Communicator& c, const OpSpec& s, int root) {
  const int n = c.size(), r = c.rank();
  const std::size_t count = s.count, width = dtype_size(s.dtype);
  if (s.kind == OpKind::ReduceScatter) {
    Bytes in = make_input(r, count * n, s.dtype, s.op);
    Bytes out(count * width);
    if (s.in_place) {
      c.reduce_scatter(in.data(), in.data() + r * count * width, count, s.dtype, s.op);
      std::copy(in.begin() + r * count * width, in.begin() + (r + 1) * count * width, out.begin());
    } else {
      c.reduce_scatter(in.data(), out.data(), count, s.dtype, s.op);
    }
    return count_wrong_reduced(out, n, r * count, count, s);
  }
  Bytes buf = make_input(r, count, s.dtype, s.op);
  Bytes out = s.in_place ? Bytes() : Bytes(count * width);
  unsigned char* recv = s.in_place ? buf.data() : out.data();
  if (s.kind == OpKind::AllReduce) {
    c.all_reduce(buf.data(), recv, count, s.dtype, s.op);
  } else {
    c.reduce(buf.data(), recv, count, s.dtype, s.op, root);
    if (r != root) return 0;
  }
  return count_wrong_reduced(s.in_place ? buf : out, n, 0, count, s);
}

std::size_t run_gathering(Communicator& c, const OpSpec& s, int root) {
  const int n = c.size(), r = c.rank();
  const std::size_t count = s.count, width = dtype_size(s.dtype);
  Bytes all(count * n * width, 0xee);
  Bytes mine = moved_block(r, count, s);
  const unsigned char* send = mine.data();
  if (s.in_place && (s.kind == OpKind::AllGather || r == root)) {
    std::copy(mine.begin(), mine.end(), all.begin() + r * count * width);
    send = all.data() + r * count * width;
  }
  if (s.kind == OpKind::AllGather) {
    c.all_gather(send, all.data(), count, s.dtype);
  } else {
    c.gather(send, r == root ? all.data() : nullptr, count, s.dtype, root);
    if (r != root) return 0;
  }
  std::size_t wrong = 0;
  for (int from = 0; from < n; ++from) wrong += count_wrong(all, from * count, from, count, s);
  return wrong;
}

std::size_t run_spreading(Communicator& c, const OpSpec& s, int root) {
  const int n = c.size(), r = c.rank();
  const std::size_t count = s.count, width = dtype_size(s.dtype);
  if (s.kind == OpKind::Broadcast) {
    Bytes buf = r == root ? moved_block(root, count, s) : Bytes(count * width, 0xee);
    c.broadcast(buf.data(), buf.data(), count, s.dtype, root);
    return count_wrong(buf, 0, root, count, s);
  }
  Bytes all;  // Scatter: block d of the root's buffer goes to rank d
  if (r == root) {
    for (int to = 0; to < n; ++to) {
      Bytes block = moved_block(to, count, s);
      all.insert(all.end(), block.begin(), block.end());
    }
  }
  Bytes out(count * width, 0xee);
  c.scatter(r == root ? all.data() : nullptr, out.data(), count, s.dtype, root);
  return count_wrong(out, 0, r, count, s);
}

std::size_t run_exchange(Communicator& c, const OpSpec& s) {
  const int n = c.size(), r = c.rank();
  const std::size_t width = dtype_size(s.dtype);
  // Rank `from` sends sizes[from][to] elements of block (from * n + to) to rank `to`.
  auto size_of = [&](int from, int to) {
    return s.kind == OpKind::AllToAll ? s.count : (s.count * (from + 1) + to) % (s.count + 3);
  };
  std::vector<std::size_t> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
  Bytes send, recv;
  for (int p = 0; p < n; ++p) {
    send_counts[p] = size_of(r, p);
    recv_counts[p] = size_of(p, r);
    send_displs[p] = send.size() / width;
    recv_displs[p] = p == 0 ? 0 : recv_displs[p - 1] + recv_counts[p - 1];
    Bytes block = moved_block(static_cast<std::size_t>(r) * n + p, send_counts[p], s);
    send.insert(send.end(), block.begin(), block.end());
  }
  recv.assign((recv_displs[n - 1] + recv_counts[n - 1]) * width, 0xee);
  if (s.kind == OpKind::AllToAll) {
    c.all_to_all(send.data(), recv.data(), s.count, s.dtype);
  } else {
    c.all_to_all_v(send.data(), send_counts, send_displs, recv.data(), recv_counts, recv_displs,
                   s.dtype);
  }
  std::size_t wrong = 0;
  for (int p = 0; p < n; ++p) {
    wrong +=
        count_wrong(recv, recv_displs[p], static_cast<std::size_t>(p) * n + r, recv_counts[p], s);
  }
  return wrong;
}

/// Each rank sends its block to the next rank and receives from the previous one.
std::size_t run_ring(Communicator& c, const OpSpec& s) {
  const int n = c.size(), r = c.rank();
  if (n == 1) return 0;
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  Bytes mine = moved_block(r, s.count, s);
  Bytes got(mine.size(), 0xee);
  Request sent = c.isend(mine.data(), s.count, s.dtype, next);
  c.recv(got.data(), s.count, s.dtype, previous);
  sent.wait();
  return count_wrong(got, 0, previous, s.count, s);
}

}  // namespace

OpSpec draw_op(std::mt19937_64& rng, std::size_t max_count) {
  OpSpec s;
  s.kind = static_cast<OpKind>(rng() % kNumOpKinds);
  s.dtype = kTypes[rng() % std::size(kTypes)];
  s.op = kOps[rng() % std::size(kOps)];
  // log-uniform: 2^u - 1 for u uniform in [0, log2(max_count + 1)]
  double top = std::log2(static_cast<double>(max_count) + 1.0);
  double u = std::uniform_real_distribution<double>(0.0, top)(rng);
  s.count = std::min(max_count, static_cast<std::size_t>(std::exp2(u) - 1.0));
  s.root_draw = static_cast<std::uint32_t>(rng());
  s.in_place = rng() % 2 == 0;
  s.salt = static_cast<std::uint32_t>(rng() % 97);
  return s;
}

std::string describe(const OpSpec& s) {
  std::string text = std::string(kKindNames[static_cast<int>(s.kind)]) + " count " +
                     std::to_string(s.count) + " " + std::string(to_string(s.dtype));
  text += " " + std::string(to_string(s.op)) + " root-draw " + std::to_string(s.root_draw);
  return text + (s.in_place ? " in-place" : "");
}

std::size_t run_checked(Communicator& comm, const OpSpec& spec) {
  const int root = static_cast<int>(spec.root_draw % static_cast<std::uint32_t>(comm.size()));
  switch (spec.kind) {
    case OpKind::AllReduce:
    case OpKind::Reduce:
    case OpKind::ReduceScatter:
      return run_reduction(comm, spec, root);
    case OpKind::AllGather:
    case OpKind::Gather:
      return run_gathering(comm, spec, root);
    case OpKind::Broadcast:
    case OpKind::Scatter:
      return run_spreading(comm, spec, root);
    case OpKind::AllToAll:
    case OpKind::AllToAllV:
      return run_exchange(comm, spec);
    case OpKind::Barrier:
      comm.barrier();
      return 0;
    case OpKind::SendRecvRing:
      return run_ring(comm, spec);
  }
  return 0;
}

std::size_t payload_bytes(const OpSpec& spec, int ranks) {
  std::size_t per_rank = spec.count * dtype_size(spec.dtype);
  switch (spec.kind) {
    case OpKind::ReduceScatter:
    case OpKind::AllToAll:
    case OpKind::AllToAllV:
      return per_rank * ranks;
    case OpKind::Barrier:
      return 0;
    default:
      return per_rank;
  }
}

}  // namespace chorus::faults
