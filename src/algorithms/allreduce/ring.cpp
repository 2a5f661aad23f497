// Ring all-reduce = ring reduce-scatter + ring all-gather.
//
// The buffer is cut into n blocks whose sizes differ by at most one
// (patterns::block_of spreads the remainder, and blocks may be empty when
// count < n). The reduce-scatter pass leaves rank r with block r reduced over
// all ranks, written straight into its place in `recv`; the all-gather pass
// then circulates the n reduced blocks so every rank holds all of them. Each
// rank sends 2 (n - 1)/n of the buffer in 2 (n - 1) steps: the choice for large
// buffers.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"

#include <algorithm>

namespace chorus::algorithms {

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  auto own = patterns::block_of(args.count, ctx.size(), ctx.rank());
  ring_reduce_scatter_pass(args, ctx, args.send, args.count,
                           element_at(args.recv, own.offset, args.dtype));
  ring_allgather_pass(args, ctx, args.recv, args.count);
}

double cost(const CostInput& in) {
  // Reduce-scatter: step 0 sends unreduced input, the n - 2 later steps partial results
  // (twice the bytes for half types: partial_scale); the all-gather moves final values.
  const Shape s = in.shape();
  const double m = in.m();
  const double partials = std::max(s.n - 2, 0.0) / s.n * m;
  return message_cost(in,
                      {2 * (s.n - 1), 2 * (s.n - 1) / s.n * m + in.extra_partial_bytes(partials),
                       (s.n - 1) / s.n * m});
}

}  // namespace

const Algorithm rows::allreduce_ring{
    .name = "ring",
    .description = "reduce-scatter ring, then all-gather ring; bandwidth-optimal",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
