// All-gather by single-copy reads of the peers' send buffers (algorithms/cma.hpp).
//
// After the cards (round g0), in round g = g0 + 1 rank r copies its own block
// into block r of its receive buffer (nothing in place), reads every peer p's
// send buffer straight into block p, posts 2g and waits until every rank has,
// because peers read its send buffer until then. No rank writes a buffer that a
// peer reads: in place, rank r's send buffer is block r of its receive buffer,
// which only its own (skipped) copy would write.
#include "algorithms/cma.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "transport/arena/host_arena.hpp"

namespace chorus::algorithms {

namespace {

const Algorithm* run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return nullptr;
  CmaCall call(args, ctx);
  if (!call.usable()) return hand_over(rows::allgather_shm_direct, args, ctx);
  auto& arena = call.arena();
  const std::uint64_t g = arena.begin_round(ctx.deadline);
  read_every_block(call, args);
  arena.post(2 * g);
  arena.wait_all(2 * g, ctx.deadline);
  return nullptr;
}

double cost(const CostInput& in) {
  return cross_memory_cost(in, 2, (in.shape().n - 1) * in.m(), in.m());
}

}  // namespace

const Algorithm rows::allgather_cma{
    .name = "cma",
    .description = "one host: every rank copies each peer's block with a cross-memory read",
    .collective = Collective::AllGather,
    .needs = kNeedsArena | kNeedsCrossMemory,
    .cost = cost,
    .run = run};

}  // namespace chorus::algorithms
