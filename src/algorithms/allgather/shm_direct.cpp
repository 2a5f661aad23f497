// All-gather directly in the host arena, one flag per round: rank r copies a
// chunk of its block into its round buffer and posts 2g; every rank copies each
// other rank's chunk out as soon as that rank's flag says it is there, in the order
// the ranks get there (HostArena::for_each_ready). In place
// (send = block r of recv) the own copy is skipped.
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "core/copy.hpp"
#include "transport/arena/host_arena.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::algorithms {
namespace {

using transport::HostArena;

void allgather_round(HostArena& arena, const Call& args, const Context& ctx, std::size_t offset,
                     std::size_t c) {
  const int r = arena.rank();
  const std::size_t bytes = bytes_of(c, args.dtype);
  const std::uint64_t g = arena.begin_round(ctx.deadline, bytes);
  const std::byte* source = element_at(args.send, offset, args.dtype);
  copy_bytes(arena.buffer(r, g), source, bytes);
  arena.post(2 * g);
  copy_elements(element_at(args.recv, r * args.count + offset, args.dtype), source, c, args.dtype);
  arena.for_each_ready(2 * g, ctx.deadline, [&](int j) {
    copy_bytes(element_at(args.recv, j * args.count + offset, args.dtype), arena.buffer(j, g),
               bytes);
  });
}

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  HostArena& arena = begin_arena_call(args, ctx);
  const std::size_t chunk = arena.round_bytes() / dtype_size(args.dtype);
  for (std::size_t offset = 0; offset < args.count; offset += chunk) {
    allgather_round(arena, args, ctx, offset, std::min(chunk, args.count - offset));
  }
}

double cost(const CostInput& in) { return arena_cost(in, 2, (in.shape().n + 1) * in.m()); }

}  // namespace

const Algorithm rows::allgather_shm_direct{
    .name = "shm_direct",
    .description = "one host: every rank writes its block to the arena, all copy out",
    .collective = Collective::AllGather,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>};

}  // namespace chorus::algorithms
