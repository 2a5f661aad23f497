// Gather directly in the host arena: per round every rank copies a chunk of
// its block into its round buffer and posts 2g; the root copies each rank's
// chunk into place as soon as that rank's flag says it is there, in the order the
// ranks get there (its own block
// straight from send, nothing in place).
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "core/copy.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  auto& arena = begin_arena_call(args, ctx);
  const int r = arena.rank();
  const std::size_t chunk = arena.round_bytes() / dtype_size(args.dtype);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    const std::size_t c = std::min(chunk, args.count - offset);
    const std::uint64_t g = arena.begin_round(ctx.deadline, bytes_of(c, args.dtype));
    const std::byte* source = element_at(args.send, offset, args.dtype);
    if (r != args.root) copy_bytes(arena.buffer(r, g), source, bytes_of(c, args.dtype));
    arena.post(2 * g);
    if (r != args.root) continue;
    copy_elements(element_at(args.recv, r * args.count + offset, args.dtype), source, c,
                  args.dtype);
    arena.for_each_ready(2 * g, ctx.deadline, [&](int j) {
      copy_bytes(element_at(args.recv, j * args.count + offset, args.dtype), arena.buffer(j, g),
                 bytes_of(c, args.dtype));
    });
  }
}

double cost(const CostInput& in) { return arena_cost(in, 2, (in.shape().n + 1) * in.m()); }

}  // namespace

const Algorithm rows::gather_shm_direct{
    .name = "shm_direct",
    .description = "one host: every rank writes the arena, the root copies out",
    .collective = Collective::Gather,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
