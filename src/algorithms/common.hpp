// Helpers shared by the algorithms: element/byte arithmetic, scratch buffers,
// a set of in-flight requests, and the cases every algorithm handles alike.
#pragma once

#include "algorithms/algorithm.hpp"
#include "core/copy.hpp"

#include <chorus/types.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace chorus::algorithms {

inline std::size_t bytes_of(std::size_t count, DataType dtype) { return count * dtype_size(dtype); }

/// Address of element `index` of a buffer of `dtype`.
inline std::byte* element_at(void* base, std::size_t index, DataType dtype) {
  return static_cast<std::byte*>(base) + bytes_of(index, dtype);
}
inline const std::byte* element_at(const void* base, std::size_t index, DataType dtype) {
  return static_cast<const std::byte*>(base) + bytes_of(index, dtype);
}

/// Copies `count` elements with `copy` (a CopyFunction, or stream_copy.hpp's ArenaCopy);
/// nothing when the buffers coincide (in place) or count is 0. Inline: with copy_bytes, a
/// small copy is a few moves.
template <typename Copy = CopyFunction>
void copy_elements(void* dst, const void* src, std::size_t count, DataType dtype,
                   Copy copy = copy_bytes) {
  if (count == 0 || dst == src) return;
  copy(dst, src, bytes_of(count, dtype));
}

/// Copies `nblocks` blocks of `count` elements rotated left by `first`:
/// dst holds src blocks first..nblocks-1, then 0..first-1. Used to move
/// between rank order and order relative to a root.
void rotate_blocks(void* dst, const void* src, int first, int nblocks, std::size_t count,
                   DataType dtype);

/// An uninitialised byte buffer owned by one algorithm call. Its start is
/// aligned for every dtype. Buffers come from and go back to a small per-thread
/// pool, so a collective called again does not fault in fresh pages each time.
class Scratch {
 public:
  Scratch() = default;
  Scratch(std::size_t count, DataType dtype);
  ~Scratch();
  Scratch(Scratch&& other) noexcept;
  Scratch& operator=(Scratch&& other) noexcept;
  std::byte* data() { return data_.get(); }
  std::byte* at(std::size_t index) { return element_at(data_.get(), index, dtype_); }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t allocated_ = 0;
  DataType dtype_ = DataType::Uint8;
};

/// Requests posted by one call, all stamped with the call's fingerprint and
/// awaited with its deadline. Destroying a set that still holds requests (an
/// exception unwound past it) aborts the transport, because the transport may
/// still write into buffers that are about to be freed.
class RequestSet {
 public:
  RequestSet(const Call& args, const Context& ctx) : ctx_(ctx), args_(args) {}
  RequestSet(const RequestSet&) = delete;
  RequestSet& operator=(const RequestSet&) = delete;
  ~RequestSet();

  transport::RequestId send(int peer, const void* data, std::size_t bytes);
  transport::RequestId recv(int peer, void* data, std::size_t bytes);
  /// Waits for every request of the set.
  void wait();
  /// Waits for one request of the set (the others stay in flight).
  void wait_for(transport::RequestId id);
  /// Posts one send and one receive and waits for both.
  void exchange(int send_to, const void* send_data, std::size_t send_bytes, int recv_from,
                void* recv_data, std::size_t recv_bytes);

 private:
  const Context& ctx_;
  const Call& args_;
  std::vector<transport::RequestId> ids_;
};

/// All-to-all-v: copies the block this rank sends itself from `source` (laid out
/// by send_counts/send_displs) into recv. Throws InvalidArgument when the send
/// and receive counts for itself differ.
void copy_alltoallv_self_block(const Call& args, int rank, const void* source);

/// The input an all-to-all-v reads from: args.send, or, in place (send == recv), a copy of
/// the part of it the send layout covers, held in `snapshot` (the output overwrites it).
const void* alltoallv_input(const Call& args, Scratch* snapshot);

/// Completes the calls that need no algorithm: a count of 0 (nothing is sent;
/// barrier and all-to-all-v do not count as empty) and a single rank (copies
/// send to recv where the collective moves data). True when the call is done. Inline: a call
/// that moves data between ranks, the common case, only reads its count and collective.
bool finish_empty_or_single_rank_call(const Call& args, const Context& ctx);
inline bool finish_trivial_call(const Call& args, const Context& ctx) {
  if (args.count != 0 && args.collective != Collective::Barrier &&
      args.collective != Collective::AllToAllV && ctx.size() > 1) {
    return false;
  }
  return finish_empty_or_single_rank_call(args, ctx);
}

/// Whether `rank` receives the call's result (a reduce: only its root).
inline bool receives_result(const Call& args, int rank) {
  return args.collective != Collective::Reduce || args.root == rank;
}

/// Runs `counterpart`, the shm_direct algorithm of the same collective, for a call the
/// selected algorithm cannot serve after all (cma reads forbidden, buffers outside the
/// shared windows), or the hierarchical one for a striped algorithm on hosts it cannot
/// stripe, and returns it for the Outcome (RunFunction). Each counterpart treats half types
/// as the algorithm that hands it a call does (Folding).
const Algorithm* hand_over(const Algorithm& counterpart, const Call& args, const Context& ctx);

}  // namespace chorus::algorithms
