// Scatter by single-copy reads of the root's buffer (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 every other rank r reads block r
// straight from the root's send buffer into its receive buffer and posts 2g; the root
// copies its own block (nothing in place), posts 2g and waits until every rank has,
// because they read its buffer until then. The others leave as soon as they have read:
// nobody reads their buffers. The copies run on the receiving ranks at once, instead of
// the root copying every block into the arena first.
#include "algorithms/cma.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "transport/arena/host_arena.hpp"

namespace chorus::algorithms {

namespace {

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  CmaCall call(args, ctx);
  if (!call.usable()) return hand_over(rows::scatter_shm_direct, args, ctx);
  auto& arena = call.arena();
  const int r = arena.rank();
  const std::uint64_t g = arena.begin_round(ctx.deadline);
  const std::size_t block = bytes_of(args.count, args.dtype);
  if (r == args.root) {
    copy_elements(args.recv, element_at(args.send, r * args.count, args.dtype), args.count,
                  args.dtype);
    arena.post(2 * g);
    arena.wait_all(2 * g, ctx.deadline);
  } else {
    call.read_send(args.root, block * static_cast<std::size_t>(r), args.recv, block);
    arena.post(2 * g);
  }
  return nullptr;
}

double cost(const CostInput& in) {
  // n - 1 ranks read a block of the root's buffer at once, but through the host's one memory
  // and, when ranks outnumber cores, on shared cores.
  return cross_memory_cost(in, 2, (in.shape().n - 1) * in.m(), in.m());
}

}  // namespace

const Algorithm rows::scatter_cma{
    .name = "cma",
    .description = "one host: every rank reads its block of the root's buffer directly",
    .collective = Collective::Scatter,
    .needs = kNeedsArena | kNeedsCrossMemory,
    .cost = cost,
    .run = run};

}  // namespace chorus::algorithms
