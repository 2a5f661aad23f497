// Scatter directly in the host arena: per round the root copies piece j (c
// elements at `offset` of block j) of every block into its round buffer and
// posts 2g; rank j waits for that flag and copies piece j out. The root's own
// block goes straight from send to recv (nothing in place).
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/stream_copy.hpp"
#include "core/copy.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  auto& arena = begin_arena_call(args, ctx);
  const int n = arena.size();
  const int r = arena.rank();
  const bool root = r == args.root;
  const std::size_t chunk = arena.round_bytes() / (dtype_size(args.dtype) * n);
  // Every copy streams once the outputs outgrow the cache (stream_copy.hpp).
  const ArenaCopy copy = arena_copy(bytes_of(args.count, args.dtype) * n >= kRootedStreamFromBytes);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    const std::size_t c = std::min(chunk, args.count - offset);
    const std::size_t piece = bytes_of(c, args.dtype);
    const std::uint64_t g = arena.begin_round(ctx.deadline, piece * n);
    if (root) {
      for (int j = 0; j < n; ++j) {
        if (j == r) continue;
        copy(arena.buffer(r, g) + piece * j,
             element_at(args.send, j * args.count + offset, args.dtype), piece);
      }
    }
    arena.post(2 * g);
    if (root) {
      copy_elements(element_at(args.recv, offset, args.dtype),
                    element_at(args.send, r * args.count + offset, args.dtype), c, args.dtype,
                    copy);
      continue;
    }
    arena.wait_for(args.root, 2 * g, ctx.deadline);
    copy(element_at(args.recv, offset, args.dtype), arena.buffer(args.root, g) + piece * r, piece);
  }
}

double cost(const CostInput& in) { return arena_cost(in, 2, (in.shape().n + 1) * in.m()); }

}  // namespace

const Algorithm rows::scatter_shm_direct{
    .name = "shm_direct",
    .description = "one host: the root writes the arena, every rank copies its block",
    .collective = Collective::Scatter,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
