// Broadcast by single-copy reads of the root's buffer (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 every other rank reads the
// whole message straight from the root's send buffer into its own receive
// buffer and posts 2g; the root fills its own receive buffer (out of place),
// posts 2g and waits until every rank has, because they read its buffer until
// then. The others leave as soon as they have read: nobody reads their buffers.
#include "algorithms/cma.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "transport/arena/host_arena.hpp"

namespace chorus::algorithms {

namespace {

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  CmaCall call(args, ctx);
  if (!call.usable()) return hand_over(rows::broadcast_shm_direct, args, ctx);
  auto& arena = call.arena();
  const std::uint64_t g = arena.begin_round(ctx.deadline);
  if (arena.rank() == args.root) {
    copy_elements(args.recv, args.send, args.count, args.dtype);
    arena.post(2 * g);
    arena.wait_all(2 * g, ctx.deadline);
  } else {
    call.read_send(args.root, 0, args.recv, bytes_of(args.count, args.dtype));
    arena.post(2 * g);
  }
  return nullptr;
}

double cost(const CostInput& in) { return cross_memory_cost(in, 2, in.m(), 0); }

}  // namespace

const Algorithm rows::broadcast_cma{
    .name = "cma",
    .description = "one host: every rank copies the root's buffer with a cross-memory read",
    .collective = Collective::Broadcast,
    .needs = kNeedsArena | kNeedsCrossMemory,
    .cost = cost,
    .run = run};

}  // namespace chorus::algorithms
