// Collectives on buffers inside the communicator's shared windows
// (transport/arena/windows.hpp): the shm_window algorithms (allreduce/shm_window.cpp,
// reducescatter/shm_window.cpp, allgather/shm_window.cpp) read and write the peers'
// buffers directly and use the host arena only for two synchronisations.
//
// A WindowCall opens one tiny arena round g: every rank publishes a card, the windows
// of its send and receive buffers and their offsets in its parts (0: some buffer lies
// outside every window), and posts 2g. Once every card is in, the call is usable when
// every card names the same two windows; every rank decides from the same cards, so
// all agree, and a rank that names a window has it mapped. Otherwise the algorithm runs
// its shm_direct counterpart. finish() posts 2g + 1 ("I no longer touch anyone's
// buffers") and waits until every rank has, so no rank leaves (and reuses its buffers)
// while a peer still reads or writes them.
#pragma once

#include "algorithms/algorithm.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus::transport {
class HostArena;
}

namespace chorus::algorithms {

class WindowCall {
 public:
  /// Begins the call and exchanges the cards; `send_bytes` and `recv_bytes` are this rank's
  /// buffers' lengths for this collective.
  WindowCall(const Call& args, const Context& ctx, std::size_t send_bytes, std::size_t recv_bytes);
  WindowCall(const WindowCall&) = delete;
  WindowCall& operator=(const WindowCall&) = delete;

  /// Whether every rank's buffers lie in the same two windows (the same on every rank).
  bool usable() const { return usable_; }
  /// Rank j's send and receive buffers (usable calls only).
  const std::byte* send(int j) const { return send_[static_cast<std::size_t>(j)]; }
  std::byte* recv(int j) const { return recv_[static_cast<std::size_t>(j)]; }
  /// Elements reduced at a time: kWindowChunkBytes of them (at least one), so that a chunk
  /// of the output stays in cache while it is finished (and, all-reduce, copied out).
  std::size_t chunk_elements() const;
  /// out = elements [first, first + count) of every rank's input reduced with args.op (this
  /// rank's first, then the next ones in ring order), divided by the rank count when the
  /// call is an average. Half types (Sum, Prod, Avg) are reduced and divided in fp32 and
  /// rounded once (Folding::Averages).
  void reduce_inputs(std::size_t first, std::size_t count, std::byte* out) const;
  /// Posts that this rank is done with every buffer and waits until every rank is.
  void finish();

 private:
  const Context& ctx_;
  const Call& args_;
  transport::HostArena& arena_;
  std::uint64_t round_ = 0;
  bool usable_ = false;
  std::vector<const std::byte*> send_;
  std::vector<std::byte*> recv_;
};

/// Above this many bytes in a rank's larger buffer, the shm_window algorithms accept a call
/// (below, the arena's one-round paths win).
inline constexpr std::size_t kMinWindowBytes = 16 * 1024;
/// Bytes of output the reducing shm_window algorithms finish at a time.
inline constexpr std::size_t kWindowChunkBytes = 64 * 1024;

}  // namespace chorus::algorithms
