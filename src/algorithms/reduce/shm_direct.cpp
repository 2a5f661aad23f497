// Reduce directly in the host arena: the all-reduce rounds of
// allreduce/shm_direct.cpp in which only the root keeps the result. Per round
// every rank copies its chunk in and posts; rank r reduces slice r of all
// buffers into its own buffer and posts again; the root copies every slice out.
// Small messages take one round in which only the root reduces all buffers.
#include "algorithms/allreduce/shm_direct.hpp"
#include "algorithms/passes.hpp"

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  reduce_through_arena(args, ctx, ctx.rank() == args.root);
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  return arena_cost(in, 2, 2 * m + m / s.n, (s.n - 1) / s.n * m);
}

}  // namespace

const Algorithm rows::reduce_shm_direct{
    .name = "shm_direct",
    .description = "one host: slices reduced in the arena, the root copies out",
    .collective = Collective::Reduce,
    .needs = kNeedsArena,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
