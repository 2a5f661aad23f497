// Barrier in the host arena: one round without data. Every rank posts the
// round's flag and waits until every other rank has posted it, so no rank
// leaves before all have arrived. Also home of arena_call.hpp's failure.
#include "algorithms/arena_call.hpp"
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "core/copy.hpp"
#include "transport/arena/host_arena.hpp"

namespace chorus::algorithms {

void fail_without_arena() {
  throw Error(Status::InternalError, "an arena algorithm ran without a host arena");
}

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  auto& arena = begin_arena_call(args, ctx);
  const std::uint64_t g = arena.begin_round(ctx.deadline, 0);
  arena.post(2 * g);
  arena.wait_all(2 * g, ctx.deadline);
}

double cost(const CostInput& in) { return arena_cost(in, 1, 0); }

}  // namespace

const Algorithm rows::barrier_shm_direct{.name = "shm_direct",
                                         .description = "one host: one round of arena flags",
                                         .collective = Collective::Barrier,
                                         .needs = kNeedsArena,
                                         .cost = cost,
                                         .run = runs<run>};

}  // namespace chorus::algorithms
