// When the arena collectives copy with streaming stores (core/copy.hpp).
//
// A copy that writes with streaming stores skips reading its destination lines
// first, which cuts its memory traffic by a third once the call's data no longer
// fits in cache (this host: 32 MiB of L3 for both cores). In cache it only loses:
// whoever reads the destination next then fetches from memory what it could have
// found in cache.
//
// - The all-to-all family (alltoall/shm_direct.cpp, alltoallv/shm_direct.cpp):
//   every byte crosses memory twice (into the arena, out of it) and no byte is read
//   by more than one rank, so both copies stream.
// - The rooted family (broadcast, scatter shm_direct): the copies into each rank's
//   output stream, the root's own block included (nothing reads an output during
//   the call). A broadcast's arena lines are read by every other rank, so its copy
//   in stays cached; a scatter's lines are read by one rank each, so they stream too.
#pragma once

#include "core/copy.hpp"

#include <cstddef>

namespace chorus::algorithms {

/// Bytes all ranks send in one all-to-all call (n x n blocks) from which the copies
/// stream. All-to-all at 4 ranks (medians of 7 runs of 100 or 20 iterations, 2-core
/// host): 1 MiB per rank (4 MiB in all) 0.36 ms plain, 0.52 ms streamed; 4 MiB per rank
/// 4.3 ms plain, 3.0 ms streamed. At 8 ranks 1 MiB per rank (8 MiB in all) already
/// streams faster: 1.37 ms against 1.75 ms.
inline constexpr std::size_t kStreamFromBytes = std::size_t{8} << 20;

/// Bytes all ranks' outputs of one rooted call hold (n x the message for a broadcast,
/// n x the block for a scatter) from which its copies stream. Broadcast, medians of 5
/// runs alternating plain and streamed binaries: 2 ranks x 4 MiB 0.45 ms plain, 0.61 ms
/// streamed; 8 ranks x 1 MiB 0.39 / 0.53 ms; 2 ranks x 8 MiB 2.3 / 1.9 ms; 8 ranks x 2 MiB
/// 1.5 / 1.0 ms; 2 ranks x 16 MiB 5.0 / 3.6 ms; 8 ranks x 4 MiB 3.3 / 2.1 ms.
inline constexpr std::size_t kRootedStreamFromBytes = std::size_t{16} << 20;

/// How one arena call copies: with copy_bytes_streaming, or with copy_bytes inline (a small
/// call's copy is a few moves, cheaper than a call through a function pointer).
struct ArenaCopy {
  bool stream = false;
  void operator()(void* dst, const void* src, std::size_t bytes) const noexcept {
    if (stream) {
      copy_bytes_streaming(dst, src, bytes);
    } else {
      copy_bytes(dst, src, bytes);
    }
  }
};

/// The copy of a call that streams when `stream`.
inline ArenaCopy arena_copy(bool stream) { return ArenaCopy{stream}; }

}  // namespace chorus::algorithms
