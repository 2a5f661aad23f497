// All-to-all directly in the host arena: per round rank r copies piece j (c
// elements at `offset` of its block for rank j, j != r) into its round buffer
// at slot j, or j - 1 past r (n - 1 slots, so a round carries a whole buffer of
// peers' pieces), and posts 2g; it then copies its own piece straight from send
// to recv (nothing in place) and piece r out of each other rank's buffer as soon
// as that rank's flag says it is there. In place is safe: this round's input
// pieces are all in the arena before any output piece is written, and no round
// reads input at the offsets an earlier round wrote.
//
// Each byte for a peer is copied twice (in, out), the own block once. The copies
// stream (stream_copy.hpp) once the call moves kStreamFromBytes in all.
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/stream_copy.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstdint>

namespace chorus::algorithms {
namespace {

/// Where `writer` puts the piece for `reader` in its round buffer: it skips itself.
std::size_t slot(int writer, int reader) {
  return static_cast<std::size_t>(reader - (reader > writer ? 1 : 0));
}

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  auto& arena = begin_arena_call(args, ctx);
  const int n = arena.size();
  const int r = arena.rank();
  const auto ranks = static_cast<std::size_t>(n);
  const auto copy =
      arena_copy(bytes_of(args.count, args.dtype) * ranks * ranks >= kStreamFromBytes);
  const std::size_t chunk = arena.round_bytes() / (dtype_size(args.dtype) * (ranks - 1));
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    const std::size_t c = std::min(chunk, args.count - offset);
    const std::size_t piece = bytes_of(c, args.dtype);
    const std::uint64_t g = arena.begin_round(ctx.deadline, piece * (ranks - 1));
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      copy(arena.buffer(r, g) + piece * slot(r, j),
           element_at(args.send, j * args.count + offset, args.dtype), piece);
    }
    arena.post(2 * g);
    if (args.send != args.recv) {
      copy(element_at(args.recv, r * args.count + offset, args.dtype),
           element_at(args.send, r * args.count + offset, args.dtype), piece);
    }
    arena.for_each_ready(2 * g, ctx.deadline, [&](int j) {
      copy(element_at(args.recv, j * args.count + offset, args.dtype),
           arena.buffer(j, g) + piece * slot(j, r), piece);
    });
  }
}

double cost(const CostInput& in) {
  // n - 1 blocks in and out, the own one straight across.
  return arena_cost(in, 2, (2 * in.shape().n - 1) * in.m());
}

}  // namespace

const Algorithm rows::alltoall_shm_direct{
    .name = "shm_direct",
    .description = "one host: every rank writes its n - 1 peers' blocks to the arena",
    .collective = Collective::AllToAll,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
