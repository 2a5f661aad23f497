// Gather by single-copy reads of the peers' buffers (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 the root copies its own block into
// block root of its receive buffer (nothing in place) and reads every peer p's send
// buffer straight into block p, then posts 2g. The others post 2g and wait for the
// root's flag, because it reads their buffers until then. No rank copies into the
// arena: each block is copied once, by the root.
#include "algorithms/cma.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "transport/arena/host_arena.hpp"

namespace chorus::algorithms {

namespace {

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  CmaCall call(args, ctx);
  if (!call.usable()) return hand_over(rows::gather_shm_direct, args, ctx);
  auto& arena = call.arena();
  const std::uint64_t g = arena.begin_round(ctx.deadline);
  if (arena.rank() != args.root) {
    arena.post(2 * g);
    arena.wait_for(args.root, 2 * g, ctx.deadline);
    return nullptr;
  }
  read_every_block(call, args);
  arena.post(2 * g);
  return nullptr;
}

double cost(const CostInput& in) {
  // The root reads n - 1 blocks in turn.
  return cross_memory_cost(in, 2, (in.shape().n - 1) * in.m(), in.m());
}

}  // namespace

const Algorithm rows::gather_cma{
    .name = "cma",
    .description = "one host: the root reads every peer's block with a cross-memory read",
    .collective = Collective::Gather,
    .needs = kNeedsArena | kNeedsCrossMemory,
    .cost = cost,
    .run = run};

}  // namespace chorus::algorithms
