// Pairwise-exchange reduce-scatter.
//
// At step k in [1, n) rank r sends its contribution to block r + k straight to
// that rank and receives rank r - k's contribution to its own block r, which
// it folds into its result (patterns/pairwise.hpp: every ordered pair meets
// once). Each rank sends (n - 1)/n of its input, like the ring, but every
// block travels one hop unreduced, so no step waits on a predecessor's
// reduction: n - 1 rounds, and the reductions of one rank are independent of
// the others'.
//
// In place `recv` is block r of `send`; only that block is ever written and it
// is never sent, so no snapshot is needed.
//
// Half types: blocks travel unreduced, in the half type; the running sum is kept in fp32
// (algorithms/partials.hpp) and rounded once, by the last step.
#include "algorithms/patterns/pairwise.hpp"

#include "algorithms/common.hpp"
#include "algorithms/partials.hpp"
#include "algorithms/passes.hpp"
#include "algorithms/patterns/blocks.hpp"
#include "core/reduce.hpp"

namespace chorus::algorithms {

using patterns::block_of;

void pairwise_reduce_scatter_pass(const Call& args, const Context& ctx, const void* contribution,
                                  std::size_t total, void* out) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const DataType dtype = args.dtype;
  auto block = [&](int index) { return block_of(total, n, index); };
  const std::size_t mine = block(rank).count;
  const DataType partial = partial_type(args);
  const int divisor = fold_half_average(args, n);
  Scratch own_sum(partial == dtype ? 0 : mine, partial);
  void* sum = partial == dtype ? out : own_sum.data();  // the running result
  Operand current{element_at(contribution, block(rank).offset, dtype), dtype};
  Scratch incoming(mine, dtype);
  RequestSet requests(args, ctx);
  for (int step = 1; step < n; ++step) {
    auto peers = patterns::pairwise_partners(rank, n, step);
    const auto sent = block(peers.send_to);
    requests.exchange(peers.send_to, element_at(contribution, sent.offset, dtype),
                      bytes_of(sent.count, dtype), peers.recv_from, incoming.data(),
                      bytes_of(mine, dtype));
    const Operand theirs{incoming.data(), dtype};
    if (step == n - 1) {
      reduce_operands(out, dtype, current, theirs, mine, args.op, divisor);
    } else {
      reduce_operands(sum, partial, current, theirs, mine, args.op);
    }
    current = {sum, partial};
  }
}

namespace {

void run(const Call& args, const Context& ctx) {
  if (finish_trivial_call(args, ctx)) return;
  const auto n = static_cast<std::size_t>(ctx.size());
  pairwise_reduce_scatter_pass(args, ctx, args.send, n * args.count, args.recv);
}

double cost(const CostInput& in) {
  const Shape s = in.shape();
  const double others = (s.n - 1) * in.m();
  return spread_cost(in, {s.n - 1, others, others});
}

}  // namespace

const Algorithm rows::reduce_scatter_pairwise{
    .name = "pairwise",
    .description = "n - 1 steps: each block sent straight to its owner",
    .collective = Collective::ReduceScatter,
    .cost = cost,
    .run = runs<run>,
    .folding = Folding::Halves};

}  // namespace chorus::algorithms
