// Shapes, buffers and calls of the timed collectives (see collectives.hpp).
#include "collectives.hpp"

#include <array>
#include <cstring>
#include <utility>

namespace chorus::perf {
namespace {

constexpr std::array<BenchInfo, 11> kBenches = {{
    {Bench::AllReduce, "allreduce", true, false, false, true, "2(n-1)/n"},
    {Bench::Broadcast, "broadcast", false, true, false, true, "1"},
    {Bench::Reduce, "reduce", true, true, false, true, "1"},
    {Bench::AllGather, "allgather", false, false, true, true, "(n-1)/n"},
    {Bench::ReduceScatter, "reducescatter", true, false, true, true, "(n-1)/n"},
    {Bench::Gather, "gather", false, true, true, true, "(n-1)/n"},
    {Bench::Scatter, "scatter", false, true, true, true, "(n-1)/n"},
    {Bench::AllToAll, "alltoall", false, false, true, true, "(n-1)/n"},
    {Bench::AllToAllV, "alltoallv", false, false, true, false, "(n-1)/n"},
    {Bench::SendRecv, "sendrecv", false, false, false, false, "1"},
    {Bench::Barrier, "barrier", false, false, false, false, "none"},
}};

const BenchInfo& info_of(Bench bench) { return kBenches[static_cast<std::size_t>(bench)]; }

// Total elements of the send and receive buffers out of place.
std::size_t send_total(const Case& c) {
  switch (c.bench) {
    case Bench::AllGather:
    case Bench::Gather:
      return c.block;
    case Bench::Barrier:
      return 0;
    default:
      return c.count;
  }
}

std::size_t recv_total(const Case& c) {
  switch (c.bench) {
    case Bench::ReduceScatter:
    case Bench::Scatter:
      return c.block;
    case Bench::Barrier:
      return 0;
    default:
      return c.count;
  }
}

void fill_alltoallv_vectors(const Case& c, Buffers& b) {
  for (int p = 0; p < c.nranks; ++p) {
    b.send_counts.push_back(alltoallv_count(c, c.rank, p));
    b.recv_counts.push_back(alltoallv_count(c, p, c.rank));
    b.send_displs.push_back(static_cast<std::size_t>(p) * c.block);
    b.recv_displs.push_back(static_cast<std::size_t>(p) * c.block);
  }
}

// In place, all within one storage of `count` elements (DESIGN.md):
// allgather/gather send = recv + rank*block; reducescatter/scatter
// recv = send + rank*block; the others send == recv.
void place_in_place(const Case& c, Buffers& b, std::size_t elem, Communicator* shared_from) {
  b.first.allocate(c.count * elem, shared_from);
  std::byte* base = b.first.data();
  std::byte* own_block = base + static_cast<std::size_t>(c.rank) * c.block * elem;
  b.send = base;
  b.recv = base;
  if (c.bench == Bench::AllGather || c.bench == Bench::Gather) b.send = own_block;
  if (c.bench == Bench::ReduceScatter || c.bench == Bench::Scatter) b.recv = own_block;
}

}  // namespace

std::span<const BenchInfo> all_benches() { return kBenches; }

const BenchInfo* find_bench(std::string_view name) {
  for (const BenchInfo& info : kBenches) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

double bus_factor(Bench bench, int nranks) {
  double n = nranks;
  switch (bench) {
    case Bench::AllReduce:
      return 2 * (n - 1) / n;
    case Bench::Broadcast:
    case Bench::Reduce:
    case Bench::SendRecv:
      return 1;
    case Bench::Barrier:
      return 0;
    default:
      return (n - 1) / n;
  }
}

Case make_case(Bench bench, std::size_t bytes, DataType dtype, ReduceOp op, int root, int rank,
               int nranks) {
  Case c{bench, dtype, op, root, rank, nranks, 0, 0};
  if (bench == Bench::Barrier) return c;
  std::size_t elements = bytes / dtype_size(dtype);
  c.block = info_of(bench).blocked ? elements / static_cast<std::size_t>(nranks) : elements;
  c.count = info_of(bench).blocked ? c.block * static_cast<std::size_t>(nranks) : elements;
  return c;
}

std::size_t alltoallv_count(const Case& c, int from, int to) {
  return c.block - static_cast<std::size_t>((from + to) % 2) * (c.block / 2);
}

double algbw_bytes(const Case& c) {
  double elem = static_cast<double>(dtype_size(c.dtype));
  if (c.bench == Bench::Barrier) return 0;
  if (c.bench != Bench::AllToAllV) return static_cast<double>(c.count) * elem;
  double total = 0;
  for (int r = 0; r < c.nranks; ++r) {
    for (int p = 0; p < c.nranks; ++p) total += static_cast<double>(alltoallv_count(c, r, p));
  }
  return total / c.nranks * elem;
}

Storage::Storage(Storage&& other) noexcept
    : heap_(std::move(other.heap_)),
      shared_(std::exchange(other.shared_, nullptr)),
      comm_(other.comm_),
      size_(std::exchange(other.size_, 0)) {}

Storage::~Storage() {
  if (shared_) comm_->free_shared(shared_);
}

void Storage::allocate(std::size_t bytes, Communicator* shared_from) {
  size_ = bytes;
  if (shared_from) {
    comm_ = shared_from;
    shared_ = static_cast<std::byte*>(shared_from->alloc_shared(bytes));
    if (shared_) std::memset(shared_, 0, bytes);  // ordinary memory (no arena) comes uncleared
  } else {
    heap_.assign(bytes, std::byte{0});
  }
}

Buffers make_buffers(const Case& c, bool in_place, Communicator* shared_from) {
  const std::size_t elem = dtype_size(c.dtype);
  Buffers b;
  b.send_elems = send_total(c);
  b.recv_elems = recv_total(c);
  if (in_place && info_of(c.bench).has_in_place) {
    place_in_place(c, b, elem, shared_from);
  } else {
    b.first.allocate(b.send_elems * elem, shared_from);
    b.second.allocate(b.recv_elems * elem, shared_from);
    b.send = b.first.data();
    b.recv = b.second.data();
  }
  if (c.bench == Bench::AllToAllV) fill_alltoallv_vectors(c, b);
  return b;
}

namespace {

void send_recv_ring(Communicator& comm, const Case& c, Buffers& b) {
  int next = (c.rank + 1) % c.nranks;
  int prev = (c.rank + c.nranks - 1) % c.nranks;
  // Even ranks post the send first, odd ranks the receive. Even if requests
  // complete strictly in issue order and a send waits for its receive, every
  // chain of waiting sends ends at an odd rank, whose receive is posted first
  // (with n odd, rank n-1 waits for rank 0, which waits for odd rank 1).
  Request first, second;
  if (c.rank % 2 == 0) {
    first = comm.isend(b.send, c.count, c.dtype, next);
    second = comm.irecv(b.recv, c.count, c.dtype, prev);
  } else {
    first = comm.irecv(b.recv, c.count, c.dtype, prev);
    second = comm.isend(b.send, c.count, c.dtype, next);
  }
  first.wait();
  second.wait();
}

}  // namespace

void run_once(Communicator& comm, const Case& c, Buffers& b) {
  switch (c.bench) {
    case Bench::AllReduce:
      comm.all_reduce(b.send, b.recv, c.count, c.dtype, c.op);
      break;
    case Bench::Broadcast:
      comm.broadcast(b.send, b.recv, c.count, c.dtype, c.root);
      break;
    case Bench::Reduce:
      comm.reduce(b.send, b.recv, c.count, c.dtype, c.op, c.root);
      break;
    case Bench::AllGather:
      comm.all_gather(b.send, b.recv, c.block, c.dtype);
      break;
    case Bench::ReduceScatter:
      comm.reduce_scatter(b.send, b.recv, c.block, c.dtype, c.op);
      break;
    case Bench::Gather:
      comm.gather(b.send, b.recv, c.block, c.dtype, c.root);
      break;
    case Bench::Scatter:
      comm.scatter(b.send, b.recv, c.block, c.dtype, c.root);
      break;
    case Bench::AllToAll:
      comm.all_to_all(b.send, b.recv, c.block, c.dtype);
      break;
    case Bench::AllToAllV:
      comm.all_to_all_v(b.send, b.send_counts, b.send_displs, b.recv, b.recv_counts, b.recv_displs,
                        c.dtype);
      break;
    case Bench::SendRecv:
      send_recv_ring(comm, c, b);
      break;
    case Bench::Barrier:
      comm.barrier();
      break;
  }
}

}  // namespace chorus::perf
