// Broadcast directly in the host arena, in chunks of about an eighth of the
// message (arena_pipeline_elements), so that the receivers copy chunk k out while
// the root copies chunk k + 1 in: per round the root copies a chunk
// into its round buffer and posts 2g; every other rank posts 2g (it finished
// reading the previous round), waits for the root's flag and copies the chunk
// out, after checking that the root's record of the round names this call. The
// root waits for nobody except, in begin_round, for every rank to have left the
// round that last used its buffer and round record (host_arena.hpp).
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
  const bool root = arena.rank() == args.root;
  const std::size_t chunk = arena_pipeline_elements(args.count, args.dtype, arena);
  // The outputs stream once they outgrow the cache (stream_copy.hpp).
  const ArenaCopy out =
      arena_copy(bytes_of(args.count, args.dtype) * arena.size() >= kRootedStreamFromBytes);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    const std::size_t c = std::min(chunk, args.count - offset);
    const std::uint64_t g = arena.begin_round(ctx.deadline, bytes_of(c, args.dtype));
    if (root) {
      copy_bytes(arena.buffer(args.root, g), element_at(args.send, offset, args.dtype),
                 bytes_of(c, args.dtype));
      arena.post(2 * g);
      copy_elements(element_at(args.recv, offset, args.dtype),
                    element_at(args.send, offset, args.dtype), c, args.dtype, out);
    } else {
      arena.post(2 * g);
      arena.wait_for(args.root, 2 * g, ctx.deadline);
      out(element_at(args.recv, offset, args.dtype), arena.buffer(args.root, g),
          bytes_of(c, args.dtype));
    }
  }
}

double cost(const CostInput& in) { return arena_cost(in, 2, 2 * in.m()); }

}  // namespace

const Algorithm rows::broadcast_shm_direct{
    .name = "shm_direct",
    .description = "one host: the root writes the arena, every rank copies out",
    .collective = Collective::Broadcast,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
