// Pairwise all-reduce = pairwise reduce-scatter + ring all-gather.
//
// Like the ring all-reduce, the buffer is cut into n blocks (patterns::block_of) and each
// rank sends 2 (n - 1)/n of it in 2 (n - 1) steps, but the reduce-scatter sends every block
// straight to its owner (pairwise_reduce_scatter_pass) instead of passing partial results
// around the ring. For fp32 and the other types the two move the same bytes and the ring,
// listed first, takes the tie. For float16/bfloat16 the ring's partial results travel in
// fp32 (algorithms/partials.hpp), twice the bytes of its n - 2 later steps, while here only
// the caller's half types travel: the model (CostInput::partial_scale) picks this one for
// large half-type messages.
#include "algorithms/common.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"

namespace chorus::algorithms {
namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const auto own = patterns::block_of(args.count, ctx.size(), ctx.rank());
  pairwise_reduce_scatter_pass(args, ctx, args.send, args.count,
                               element_at(args.recv, own.offset, args.dtype));
  ring_allgather_pass(args, ctx, args.recv, args.count);
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double m = in.m();
  // A pairwise reduce-scatter (spread over every rank), then a ring all-gather.
  const CostTerms half{s.n - 1, (s.n - 1) / s.n * m, 0};
  return spread_cost(in, {half.rounds, half.bytes_moved, (s.n - 1) / s.n * m}) +
         message_cost(in, half);
}

}  // namespace

const Algorithm rows::allreduce_pairwise{
    .name = "pairwise",
    .description = "pairwise reduce-scatter (no partial results travel), then all-gather ring",
    .collective = Collective::AllReduce,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
