// Helpers shared by the algorithms.
#include "algorithms/common.hpp"

#include "core/copy.hpp"
#include "transport/arena/host_arena.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace chorus::algorithms {

void rotate_blocks(void* dst, const void* src, int first, int nblocks, std::size_t count,
                   DataType dtype) {
  const auto head = static_cast<std::size_t>(first) * count;
  const auto tail = static_cast<std::size_t>(nblocks - first) * count;
  copy_elements(dst, element_at(src, head, dtype), tail, dtype);
  copy_elements(element_at(dst, tail, dtype), src, head, dtype);
}

namespace {

/// Buffers of finished Scratch objects on this thread (an algorithm call runs on one thread):
/// at most kMaxBuffers, none over kMaxBufferBytes; the largest are kept.
class ScratchPool {
 public:
  ScratchPool() {
    free_.reserve(kMaxBuffers + 1);
  }  // give() never allocates: it runs in destructors
  std::unique_ptr<std::byte[]> take(std::size_t bytes, std::size_t* allocated) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
    }
    if (best == free_.end()) {
      *allocated = bytes;
      return std::make_unique_for_overwrite<std::byte[]>(bytes);
    }
    *allocated = best->bytes;
    std::unique_ptr<std::byte[]> data = std::move(best->data);
    free_.erase(best);
    return data;
  }
  void give(std::unique_ptr<std::byte[]> data, std::size_t bytes) {
    if (!data || bytes > kMaxBufferBytes) return;
    free_.push_back(Free{bytes, std::move(data)});
    if (free_.size() <= kMaxBuffers) return;
    auto smallest = std::min_element(
        free_.begin(), free_.end(), [](const Free& a, const Free& b) { return a.bytes < b.bytes; });
    free_.erase(smallest);
  }

 private:
  static constexpr std::size_t kMaxBuffers = 4;
  static constexpr std::size_t kMaxBufferBytes = std::size_t{256} << 20;
  struct Free {
    std::size_t bytes;
    std::unique_ptr<std::byte[]> data;
  };
  std::vector<Free> free_;
};

ScratchPool& scratch_pool() {
  thread_local ScratchPool pool;
  return pool;
}

}  // namespace

Scratch::Scratch(std::size_t count, DataType dtype) : dtype_(dtype) {
  data_ = scratch_pool().take(bytes_of(count, dtype), &allocated_);
}

Scratch::~Scratch() { scratch_pool().give(std::move(data_), allocated_); }

Scratch::Scratch(Scratch&& other) noexcept
    : data_(std::move(other.data_)), allocated_(other.allocated_), dtype_(other.dtype_) {
  other.allocated_ = 0;
}

Scratch& Scratch::operator=(Scratch&& other) noexcept {
  if (this == &other) return *this;
  scratch_pool().give(std::move(data_), allocated_);
  data_ = std::move(other.data_);
  allocated_ = other.allocated_;
  dtype_ = other.dtype_;
  other.allocated_ = 0;
  return *this;
}

RequestSet::~RequestSet() {
  if (ids_.empty()) return;
  try {
    ctx_.transport.abort(Status::InternalError,
                         std::string(to_string(args_.collective)) +
                             " stopped with requests in flight; the connections are closed");
  } catch (...) {
    // abort() is best effort; a destructor must not throw.
  }
}

transport::RequestId RequestSet::send(int peer, const void* data, std::size_t bytes) {
  ids_.push_back(ctx_.transport.post_send(peer, data, bytes, args_.fingerprint));
  return ids_.back();
}

transport::RequestId RequestSet::recv(int peer, void* data, std::size_t bytes) {
  ids_.push_back(ctx_.transport.post_recv(peer, data, bytes, args_.fingerprint));
  return ids_.back();
}

void RequestSet::wait_for(transport::RequestId id) {
  ctx_.transport.wait(std::span(&id, 1), ctx_.deadline);
  ids_.erase(std::find(ids_.begin(), ids_.end(), id));
}

void RequestSet::wait() {
  if (ids_.empty()) return;
  ctx_.transport.wait(ids_, ctx_.deadline);
  ids_.clear();
}

void RequestSet::exchange(int send_to, const void* send_data, std::size_t send_bytes, int recv_from,
                          void* recv_data, std::size_t recv_bytes) {
  recv(recv_from, recv_data, recv_bytes);
  send(send_to, send_data, send_bytes);
  wait();
}

const void* alltoallv_input(const Call& args, Scratch* snapshot) {
  if (args.send != args.recv || args.send == nullptr) return args.send;
  std::size_t extent = 0;
  for (std::size_t p = 0; p < args.send_counts.size(); ++p) {
    if (args.send_counts[p] > 0)
      extent = std::max(extent, args.send_displs[p] + args.send_counts[p]);
  }
  *snapshot = Scratch(extent, args.dtype);
  copy_elements(snapshot->data(), args.send, extent, args.dtype);
  return snapshot->data();
}

void copy_alltoallv_self_block(const Call& args, int rank, const void* source) {
  auto r = static_cast<std::size_t>(rank);
  std::size_t sent = args.send_counts[r];
  std::size_t expected = args.recv_counts[r];
  if (sent != expected) {
    throw Error(Status::InvalidArgument,
                "alltoallv: rank " + std::to_string(rank) + " sends " + std::to_string(sent) +
                    " elements to itself but expects " + std::to_string(expected));
  }
  // memmove: in place (send == recv) the two displacements may make the blocks overlap.
  if (sent > 0) {
    std::memmove(element_at(args.recv, args.recv_displs[r], args.dtype),
                 element_at(source, args.send_displs[r], args.dtype), bytes_of(sent, args.dtype));
  }
}

bool finish_empty_or_single_rank_call(const Call& args, const Context& ctx) {
  bool single = ctx.size() == 1;
  switch (args.collective) {
    case Collective::Barrier:
      return single;
    case Collective::AllToAllV:
      if (single) copy_alltoallv_self_block(args, 0, args.send);
      return single;
    default:
      break;
  }
  if (args.count == 0) return true;
  if (single) copy_elements(args.recv, args.send, args.count, args.dtype);
  return single;
}

const Algorithm* hand_over(const Algorithm& counterpart, const Call& args, const Context& ctx) {
  const Algorithm* other = counterpart.run(args, ctx);
  return other ? other : &counterpart;
}

}  // namespace chorus::algorithms
